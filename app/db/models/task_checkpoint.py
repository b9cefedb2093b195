from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, String
from sqlmodel import Field, SQLModel

from app.db.types import JSONType, UTCDateTime, utcnow


class TaskCheckpoint(SQLModel, table=True):
    """A session's task list as replaying its log up to `seq` gives it: where the next
    rebuild starts, instead of the log's first item (`app.services.tasks`).

    Derived, never the truth: the log is append-only, so a checkpoint stays exact for
    ever, and a rebuild without one (or with one it cannot read) replays the log whole."""

    __tablename__ = "task_checkpoints"

    session_id: str = Field(
        sa_column=Column(
            String(40), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
        )
    )
    seq: int
    # the task operations the list holds (replayed or refused): how far the log has run
    ops: int
    state: dict[str, Any] = Field(sa_column=Column(JSONType, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
