"""Items as the API shows them: the log's metadata plus the payload, one union on `kind`."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from app.api.schemas.files import CONTENT_DESCRIPTION, ContentPart
from app.db.models import Item
from app.db.models.item import AppendedItem
from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    Origin,
    Rewind,
    SystemMessage,
    TaskEvent,
    ToolResult,
    UserMessage,
)


class ItemKind(StrEnum):
    """What an item of the log is (its `kind`)."""

    user_message = "user_message"
    assistant_message = "assistant_message"
    tool_result = "tool_result"
    system = "system"
    compact_summary = "compact_summary"
    task_event = "task_event"
    rewind = "rewind"


class ItemMeta(BaseModel):
    session_id: str = Field(
        description="The session that wrote it: a fork's log begins with its parent's items."
    )
    seq: int = Field(description="Position in the session's log, 1-based, gap-free.")
    turn: int
    segment: int
    origin: Origin
    created_at: datetime
    reverted: bool = Field(
        default=False,
        description="A rewind took it back: the model no longer sees it, task replay skips "
        "it (a rewind to a later point brings it back).",
    )


class UserMessageItem(ItemMeta, UserMessage):
    """`user_message`: what a user (or a client on its behalf) said; opens a turn."""


class AssistantMessageItem(ItemMeta, AssistantMessage):
    """`assistant_message`: one LLM answer, its text, `tool_use` and thinking blocks."""


class ToolResultItem(ItemMeta, ToolResult):
    """`tool_result`: the results of one answer's tool calls, in the order they were asked."""


class SystemItem(ItemMeta, SystemMessage):
    """`system`: a note for the model, not said by the user: a client's (`POST …/items`),
    a compaction's task snapshot, or what Claude Code's harness injected into a session."""


class CompactSummaryItem(ItemMeta, CompactSummary):
    """`compact_summary`: the summary a compacted segment starts with."""


class TaskEventItem(ItemMeta, TaskEvent):
    """`task_event`: a task change made through the REST task routes, recorded so that
    replaying the log rebuilds the task list as the Task tools would have left it."""


class RewindItem(ItemMeta, Rewind):
    """`rewind`: the session went back to the log as it ended at `to_seq`
    (`POST …/rewind`); the items after it, up to this one, are `reverted`."""


ItemPublic = Annotated[
    UserMessageItem
    | AssistantMessageItem
    | ToolResultItem
    | SystemItem
    | CompactSummaryItem
    | TaskEventItem
    | RewindItem,
    Field(discriminator="kind"),
]
_item_adapter: TypeAdapter[ItemPublic] = TypeAdapter(ItemPublic)


def item_public(row: Item | AppendedItem, *, reverted: bool = False) -> ItemPublic:
    return _item_adapter.validate_python(
        {
            **row.payload,
            "kind": row.kind,
            "session_id": row.session_id,
            "seq": row.seq,
            "turn": row.turn,
            "segment": row.segment,
            "origin": row.origin,
            "created_at": row.created_at,
            "reverted": reverted,
        }
    )


class ItemCreate(BaseModel):
    """An item a client appends itself, for clients that drive their own agent loop."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"kind": "user_message", "text": "Please summarise the log so far."}]
        },
    )

    kind: Literal["user_message", "system"]
    text: str | None = Field(default=None, min_length=1, max_length=1_000_000)
    content: list[ContentPart] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description=CONTENT_DESCRIPTION + " A `user_message`'s only.",
    )

    @model_validator(mode="after")
    def _text_or_content(self) -> ItemCreate:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of `text` and `content`")
        if self.content is not None and self.kind != "user_message":
            raise ValueError("a `system` item takes `text`, not `content`")
        return self


class ItemList(BaseModel):
    data: list[ItemPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next page; null on the last page."
    )
