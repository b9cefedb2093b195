"""The LLM boundary: one Protocol and provider-neutral request/response types.

Everything above this module speaks these types; only `app.engine.anthropic`
knows the SDK. Content blocks reuse the event log's block models, plus the
tool-result block that exists only on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from app.domain.items import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    UserBlock,
)
from app.domain.usage import Usage


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[UserBlock]
    is_error: bool = False


MessageBlock = Annotated[
    ContentBlock | DocumentBlock | ToolResultBlock, Field(discriminator="type")
]


Role = Literal["user", "assistant"]


class Message(BaseModel):
    """One message of a request: an immutable value (frozen, blocks in a tuple), so the
    messages of a segment are built once and shared by every request that sends them,
    and nothing an interceptor does can reach the history they were built from."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: tuple[MessageBlock, ...]

    @cached_property
    def json_value(self) -> dict[str, Any] | None:
        """The message as a request carries it, made once per message. Read-only: shared by
        every request that sends this message (dumping every block of a long segment for
        each request would be most of the CPU of an agent step; filtering and wrapping
        them again, ~0.5 µs a message). Its blocks as JSON values, without those a request
        may not carry: thinking (valid only with extended thinking on) and text without
        visible text (a model may answer one). None when no block is left."""
        blocks = [
            block.model_dump(mode="json", exclude_none=True)
            for block in self.content
            if _sendable(block)
        ]
        return {"role": self.role, "content": blocks} if blocks else None

    @cached_property
    def attached(self) -> tuple[ImageBlock | DocumentBlock, ...]:
        """Its images and documents, those in its tool results too, found once: every
        request looks for them (`app.engine.media`), and a segment's messages are shared
        by its requests."""
        found: list[ImageBlock | DocumentBlock] = []
        for block in self.content:
            if isinstance(block, ImageBlock | DocumentBlock):
                found.append(block)
            elif isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
                found.extend(b for b in block.content if isinstance(b, ImageBlock | DocumentBlock))
        return tuple(found)


def _sendable(block: MessageBlock) -> bool:
    if isinstance(block, ThinkingBlock):
        return False
    return not (isinstance(block, TextBlock) and not block.text.strip())


class ToolSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]

    @cached_property
    def json_value(self) -> dict[str, Any]:
        """The spec as a JSON value, made once (read-only, like `Message.json_content`)."""
        return self.model_dump(mode="json")

    @cached_property
    def schema_chars(self) -> int:
        """The length of its input schema as JSON, counted once: a process's specs are
        built once and sized in every request (`app.engine.context`)."""
        return len(json.dumps(self.input_schema, ensure_ascii=False, separators=(",", ":")))


@dataclass
class LLMRequest:
    """One model call. Its messages and tools are immutable and may be shared with other
    requests; an interceptor that changes a request gives it new ones (see
    `app.engine.requests.with_text_at_end`), never edits them in place."""

    model: str
    system: str | None
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    # whether the request marks prompt-cache breakpoints: a one-off request, whose prompt
    # no later request repeats, would only pay for a cache write (1.25x) never read
    cached: bool = True
    # trailing blocks of the last message that only this request sends (the task reminder):
    # no cache breakpoint goes on them, since no later request could read what it wrote
    volatile_blocks: int = 0
    # the Anthropic betas the request needs (`anthropic-beta`): the Files API's when a
    # block names an uploaded file (`app.engine.media`)
    betas: tuple[str, ...] = ()


class LLMResponse(BaseModel):
    content: list[ContentBlock]
    stop_reason: str | None
    usage: Usage
    model: str | None = None


FILES_API_BETA = "files-api-2025-04-14"
"""The Anthropic beta of the Files API: to upload a file, and in a request naming one."""

# a text delta and the index of the content block it belongs to (in the response)
TextSink = Callable[[str, int], Awaitable[None]]


class LLMError(Exception):
    """The LLM could not answer. `slug` names the cause as a problem type."""

    def __init__(self, slug: str, detail: str, *, status: int | None = None) -> None:
        super().__init__(detail)
        self.slug = slug
        self.detail = detail
        self.status = status


class LLM(Protocol):
    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        """One model call. Text deltas go to `on_text` as they arrive, with their block's index."""
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
    "Role",
    "TextSink",
    "ToolResultBlock",
    "ToolSpec",
    "Usage",
    "text_of",
]
