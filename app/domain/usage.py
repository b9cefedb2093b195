"""Token usage of LLM requests, as the Messages API reports it."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
        )

    @property
    def context_tokens(self) -> int:
        """Tokens of the prompt as the model saw it, cached or not."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
