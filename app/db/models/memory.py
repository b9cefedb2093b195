from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
    text,
)
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, UTCDateTime, utcnow
from app.memory.timeref import second_of_day


class MemoryTurn(SQLModel, table=True):
    """One turn's L2 body and L1 skeleton. `ended_at` is its stable, time-addressable id.

    `session_id` is the owner (a merge moves turns); `origin_session_id` and `turn`
    say where it happened and never change, which keeps re-projection idempotent.
    """

    __tablename__ = "memory_turns"
    __table_args__ = (
        UniqueConstraint("origin_session_id", "turn", name="uq_memory_turns_origin_turn"),
        Index("ix_memory_turns_session_ended", "session_id", "ended_at"),
        # a time of day, on any day: one index range per zone offset, not one per day
        Index("ix_memory_turns_session_second", "session_id", "ended_second"),
        # the turns still waiting for their L1 summary: few, and counted at every turn end
        Index(
            "ix_memory_turns_without_l1",
            "session_id",
            "ended_at",
            sqlite_where=text("l1 IS NULL"),
            postgresql_where=text("l1 IS NULL"),
        ),
    )

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    session_id: str = Field(
        sa_column=Column(String(40), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    )
    origin_session_id: str = Field(max_length=40)
    turn: int
    ended_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    # when the turn began (its prompt): a look-up matches the span from it to `ended_at`;
    # None for turns projected before it was kept (their span is their end)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
    # the second of its UTC day `ended_at` falls in, kept by the mapper events below
    ended_second: int = Field(
        default=0, sa_column_kwargs={"server_default": text("0"), "nullable": False}
    )
    user_text: str = Field(default="", sa_column=Column(Text, nullable=False))
    assistant_text: str = Field(default="", sa_column=Column(Text, nullable=False))
    l1: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    l1_fallback: bool = False
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


@event.listens_for(MemoryTurn, "before_insert")
@event.listens_for(MemoryTurn, "before_update")
def _keep_ended_second(_mapper: Any, _connection: Any, turn: MemoryTurn) -> None:
    """Whoever writes a turn through the ORM, its `ended_second` follows its `ended_at`."""
    turn.ended_second = second_of_day(turn.ended_at)


class MemoryDetail(SQLModel, table=True):
    """L3: a tool input, tool output, system message or image placeholder of a turn."""

    __tablename__ = "memory_details"
    __table_args__ = (
        UniqueConstraint("origin_session_id", "source_id", name="uq_memory_details_source"),
        Index("ix_memory_details_turn", "turn_id"),
    )

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    turn_id: int = Field(
        sa_column=Column(
            BigIntPK, ForeignKey("memory_turns.id", ondelete="CASCADE"), nullable=False
        )
    )
    origin_session_id: str = Field(max_length=40)
    kind: str = Field(max_length=20)
    source_id: str = Field(max_length=200)
    tool_name: str | None = Field(default=None, max_length=100)
    is_error: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    text: str = Field(sa_column=Column(Text, nullable=False))
