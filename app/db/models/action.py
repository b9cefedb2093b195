from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, Index, String, Text
from sqlmodel import Field, SQLModel

from app.db.types import JSONType, UTCDateTime, one_of, utcnow
from app.domain.actions import ActionStatus


class JobAction(SQLModel, table=True):
    """A tool call that waits for a person (`app.domain.actions`): written with its job's
    move to `waiting_human`, resolved by `POST /jobs/{id}/actions/{action_id}`, and marked
    `started_at` by the run that runs it (so no run runs it twice)."""

    __tablename__ = "job_actions"
    __table_args__ = (
        Index("ix_job_actions_job", "job_id", "created_at"),
        Index("ix_job_actions_status_expires", "status", "expires_at"),
        one_of("status", ActionStatus, "ck_job_actions_status"),
    )

    id: str = Field(primary_key=True, max_length=40)
    tenant: str = Field(max_length=100)
    job_id: str = Field(
        sa_column=Column(String(40), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False)
    )
    session_id: str = Field(max_length=40)
    tool_use_id: str = Field(max_length=100)
    tool: str = Field(max_length=200)
    input: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSONType, nullable=False))
    kind: str = Field(default="tool", max_length=20)
    # the rule that asked: its layer, its place in that layer's list, the rule as written
    layer: str | None = Field(default=None, max_length=20)
    rule_index: int | None = None
    rule: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONType, nullable=True))
    on_timeout: str | None = Field(default=None, max_length=20)
    status: str = Field(default=ActionStatus.pending.value, max_length=20)
    decision: str | None = Field(default=None, max_length=20)
    # edit: the input the call runs with; respond: the content (and is_error) it answers
    decided_input: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSONType, nullable=True)
    )
    content: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    is_error: bool = False
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    resolved_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
