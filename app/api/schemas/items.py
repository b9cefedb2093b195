"""Items as the API shows them: the log's metadata plus the payload, one union on `kind`."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from app.db.models import Item
from app.db.models.item import AppendedItem
from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    Origin,
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


class ItemMeta(BaseModel):
    session_id: str
    seq: int = Field(description="Position in the session's log, 1-based, gap-free.")
    turn: int
    segment: int
    origin: Origin
    created_at: datetime


class UserMessageItem(ItemMeta, UserMessage):
    pass


class AssistantMessageItem(ItemMeta, AssistantMessage):
    pass


class ToolResultItem(ItemMeta, ToolResult):
    pass


class SystemItem(ItemMeta, SystemMessage):
    pass


class CompactSummaryItem(ItemMeta, CompactSummary):
    pass


class TaskEventItem(ItemMeta, TaskEvent):
    pass


ItemPublic = Annotated[
    UserMessageItem
    | AssistantMessageItem
    | ToolResultItem
    | SystemItem
    | CompactSummaryItem
    | TaskEventItem,
    Field(discriminator="kind"),
]
_item_adapter: TypeAdapter[ItemPublic] = TypeAdapter(ItemPublic)


def item_public(row: Item | AppendedItem) -> ItemPublic:
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
    text: str = Field(min_length=1, max_length=1_000_000)


class ItemList(BaseModel):
    data: list[ItemPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next page; null on the last page."
    )
