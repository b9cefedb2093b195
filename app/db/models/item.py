from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Column, ForeignKey, Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, JSONType, UTCDateTime, utcnow

SEQ_MAX = 2**31 - 1
"""The largest `seq` a session's log can hold: the column is a 32-bit integer on
PostgreSQL."""


class Item(SQLModel, table=True):
    """One event of a session's append-only log, `(session_id, seq, kind, payload)`."""

    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("session_id", "seq", name="uq_items_session_seq"),
        Index("ix_items_session_segment", "session_id", "segment", "seq"),
        Index("ix_items_session_tool", "session_id", "tool_name", "seq"),
        # a turn's items (a fork's or rewind's point, the memory projection): an index
        # range, however long the log
        Index("ix_items_session_turn", "session_id", "turn", "seq"),
        UniqueConstraint("session_id", "source_id", name="uq_items_session_source"),
    )

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    session_id: str = Field(
        sa_column=Column(String(40), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    )
    seq: int
    turn: int
    segment: int
    kind: str = Field(max_length=40)
    origin: str = Field(max_length=20)
    tool_name: str | None = Field(default=None, max_length=100)
    # the id of an imported entry (Claude Code uuid / tool_use id): imports are idempotent
    source_id: str | None = Field(default=None, max_length=200)
    payload: dict[str, Any] = Field(sa_column=Column(JSONType, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class AppendedItem(NamedTuple):
    """An item as it was just inserted: every column but the surrogate `id`, which
    nothing reads (an ORM object for each append cost more than the INSERT)."""

    session_id: str
    seq: int
    turn: int
    segment: int
    kind: str
    origin: str
    tool_name: str | None
    source_id: str | None
    payload: dict[str, Any]
    created_at: datetime
