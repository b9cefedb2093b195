from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, Index, String
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, JSONType, UTCDateTime, utcnow


class Event(SQLModel, table=True):
    """A durable fact clients may stream: an item appended, a job's status, usage.

    Written in the transaction that caused it; its id is the SSE event id, so a
    client reconnecting with `Last-Event-ID` reads on from the table.
    """

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_session_id", "session_id", "id"),
        Index("ix_events_job_id", "job_id", "id"),
    )

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    session_id: str = Field(
        sa_column=Column(String(40), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    )
    job_id: str | None = Field(default=None, max_length=40)
    type: str = Field(max_length=40)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSONType, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
