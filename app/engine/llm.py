"""The LLM boundary: one Protocol and provider-neutral request/response types.

Everything above this module speaks these types; only `app.engine.anthropic`
knows the SDK. Content blocks reuse the event log's block models, plus the
tool-result block that exists only on the wire.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, TypeVar

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


Role = Literal["user", "assistant"]


class Message(BaseModel):
    role: Role
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
        """A deep copy, so interceptors can never reach the stored history.

        Built with `model_construct` from already valid parts: pydantic's generic deep
        copy costs several milliseconds for a 200-item segment, on every request."""
        return LLMRequest(
            model=self.model,
            system=self.system,
            messages=[
                Message.model_construct(role=m.role, content=[_copied(b) for b in m.content])
                for m in self.messages
            ],
            tools=[_copied(t) for t in self.tools],
            max_tokens=self.max_tokens,
        )


_Model = TypeVar("_Model", bound=BaseModel)


def _copied(model: _Model) -> _Model:
    """A copy of a model whose fields are JSON values or models: containers are copied
    all the way down, strings and numbers are immutable and shared."""
    fields = {name: _copied_value(value) for name, value in model.__dict__.items()}
    return model.model_construct(model.model_fields_set, **fields)


def _copied_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _copied(value)
    if isinstance(value, dict):
        return {key: _copied_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied_value(item) for item in value]
    return value


class LLMResponse(BaseModel):
    content: list[ContentBlock]
    stop_reason: str | None
    usage: Usage
    model: str | None = None


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
