"""The event log's item types: one discriminated union, round-tripping through JSON.

An item is persisted as `(session_id, seq, kind, payload)`; `payload` is the model
below minus `kind`. Content blocks mirror the Anthropic Messages API shapes so a
segment turns into a request without translation tables.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from app.domain.usage import Usage


class Origin(StrEnum):
    """Who caused an item: the model, a human, an API client, Strata itself, or an import."""

    llm = "llm"
    user = "user"
    api = "api"
    system = "system"
    import_ = "import"


class _Block(BaseModel):
    """Content blocks are immutable values: a running job's segment, the requests built
    from it and the log all share them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ThinkingBlock(_Block):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class FileRef(_Block):
    """A stored file (`POST /files`) that a block carries by reference: the log keeps this,
    a request carries the file's bytes (`app.engine.media`). What it says of the file is
    what a request's size and a placeholder need, so neither reads the file."""

    file_id: str
    filename: str
    media_type: str
    size: int = Field(description="Bytes.")
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    tokens: int = Field(description="The tokens a request that carries it costs, about.")


class _Attached(_Block):
    """A block whose content is either given (`source`, as the Messages API takes it) or a
    stored file (`file`); exactly one of the two."""

    source: dict[str, Any] | None = None
    file: FileRef | None = None

    @model_validator(mode="after")
    def _one_content(self) -> _Attached:
        if (self.source is None) == (self.file is None):
            raise ValueError("a block holds exactly one of `source` and `file`")
        return self


class ImageBlock(_Attached):
    type: Literal["image"] = "image"


class DocumentBlock(_Attached):
    type: Literal["document"] = "document"
    title: str | None = None


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ThinkingBlock | ImageBlock, Field(discriminator="type")
]
UserBlock = Annotated[TextBlock | ImageBlock | DocumentBlock, Field(discriminator="type")]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserMessage(_Payload):
    kind: Literal["user_message"] = "user_message"
    content: list[UserBlock]


class AssistantMessage(_Payload):
    kind: Literal["assistant_message"] = "assistant_message"
    content: list[ContentBlock]
    model: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None


class ToolResult(_Payload):
    kind: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[UserBlock]
    is_error: bool = False
    name: str | None = Field(default=None, description="The tool that produced it.")
    input: dict[str, Any] | None = Field(
        default=None,
        description="The call's arguments, kept for calls whose effect is replayed (task tools).",
    )


class SystemMessage(_Payload):
    kind: Literal["system"] = "system"
    text: str


class CompactSummary(_Payload):
    kind: Literal["compact_summary"] = "compact_summary"
    text: str


class TaskEvent(_Payload):
    """A task change made over REST: replayed exactly like the TaskCreate/TaskUpdate call."""

    kind: Literal["task_event"] = "task_event"
    op: Literal["TaskCreate", "TaskUpdate"]
    input: dict[str, Any]
    taskid: int = Field(description="The task the change was applied to.")


class Rewind(_Payload):
    """A rewind (`POST /sessions/{id}/rewind`): from here on the session reads its log as
    it was when `to_seq` was its end; the items in between stay in the log, reverted. A
    marker: it says nothing to the model and changes no task."""

    kind: Literal["rewind"] = "rewind"
    to_seq: int = Field(description="The log's end the session went back to.")
    from_seq: int = Field(description="The log's end before the rewind (undo: rewind to it).")
    files: bool = Field(
        default=False, description="Whether it restored the job's workspace too (`files: true`)."
    )


REWIND_NAME = "rewind"
"""The indexed name of a rewind item (`tool_name`): task replay reads task items by name,
and a rewind among them says the list must be replayed anew."""


ItemPayload = Annotated[
    UserMessage
    | AssistantMessage
    | ToolResult
    | SystemMessage
    | CompactSummary
    | TaskEvent
    | Rewind,
    Field(discriminator="kind"),
]
ItemKind = Literal[
    "user_message",
    "assistant_message",
    "tool_result",
    "system",
    "compact_summary",
    "task_event",
    "rewind",
]

payload_adapter: TypeAdapter[ItemPayload] = TypeAdapter(ItemPayload)


def user_text(text: str) -> UserMessage:
    return UserMessage(content=[TextBlock(text=text)])


def starts_turn(payload: ItemPayload) -> bool:
    """A user message opens a new turn; everything else belongs to the current one."""
    return isinstance(payload, UserMessage)


def tool_name_of(payload: ItemPayload) -> str | None:
    """The indexed tool name of an item: what task replay and memory look items up by."""
    if isinstance(payload, ToolResult):
        return payload.name
    if isinstance(payload, TaskEvent):
        return payload.op
    if isinstance(payload, Rewind):
        return REWIND_NAME
    return None


def dump_payload(payload: ItemPayload) -> dict[str, Any]:
    data = payload.model_dump(mode="json")
    data.pop("kind")
    return data


def load_payload(kind: str, data: dict[str, Any]) -> ItemPayload:
    return payload_adapter.validate_python({**data, "kind": kind})
