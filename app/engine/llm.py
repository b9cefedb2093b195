"""The LLM boundary: one Protocol and provider-neutral request/response types.

Everything above this module speaks these types; only `app.engine.anthropic`
knows the SDK. Content blocks reuse the event log's block models, plus the
tool-result block that exists only on the wire.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from app.domain.items import ContentBlock, ImageBlock, TextBlock, UserBlock
from app.domain.usage import Usage


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[UserBlock]
    is_error: bool = False


MessageBlock = Annotated[ContentBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    role: Literal["user", "assistant"]
    content: list[MessageBlock]


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class LLMRequest:
    model: str
    system: str | None
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096

    def copy(self) -> LLMRequest:
        """A deep copy, so interceptors can never reach the stored history."""
        return LLMRequest(
            model=self.model,
            system=self.system,
            messages=[m.model_copy(deep=True) for m in self.messages],
            tools=[t.model_copy(deep=True) for t in self.tools],
            max_tokens=self.max_tokens,
        )


class LLMResponse(BaseModel):
    content: list[ContentBlock]
    stop_reason: str | None
    usage: Usage
    model: str | None = None


TextSink = Callable[[str], Awaitable[None]]


class LLMError(Exception):
    """The LLM could not answer. `slug` names the cause as a problem type."""

    def __init__(self, slug: str, detail: str, *, status: int | None = None) -> None:
        super().__init__(detail)
        self.slug = slug
        self.detail = detail
        self.status = status


class LLM(Protocol):
    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        """One model call. Text deltas go to `on_text` as they arrive."""
        ...


def text_of(blocks: list[ContentBlock] | list[MessageBlock]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


__all__ = [
    "LLM",
    "ImageBlock",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "MessageBlock",
    "TextSink",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "text_of",
]
