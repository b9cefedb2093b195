from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Column, ForeignKey, Index, String, Text, false, text
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, EnumText, JSONType, UTCDateTime, one_of, utcnow
from app.domain.jobs import JobKind, JobStatus


class Job(SQLModel, table=True):
    """One unit of background work, claimed by a runner under a lease.

    `number` is the queue order: a session's jobs run one at a time in this order.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_status_number", "status", "number"),
        Index("ix_jobs_session_number", "session_id", "number"),
        Index("ix_jobs_session_status_number", "session_id", "status", "number"),
        one_of("status", JobStatus, "ck_jobs_status"),
        one_of("kind", JobKind, "ck_jobs_kind"),
    )

    number: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    id: str = Field(unique=True, max_length=40)
    tenant: str = Field(max_length=100)
    session_id: str = Field(
        sa_column=Column(String(40), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    )
    # which handler runs it; only `piece` jobs name a piece
    kind: JobKind = Field(
        default=JobKind.chat, sa_column=Column(EnumText(JobKind, 20), nullable=False)
    )
    piece: str | None = Field(default=None, max_length=100)
    # "session": runs alone and in order within its session (turns, compaction);
    # "background": runs beside them (memory summaries), never delaying a reply
    lane: str = Field(default="session", max_length=20)
    # set by `app.services.jobs.enqueue` and `set_status`
    status: JobStatus = Field(
        default=JobStatus.queued, sa_column=Column(EnumText(JobStatus, 30), nullable=False)
    )
    turn: int | None = None
    # piece jobs: the instruction, the movement running (or to resume), the runner's
    # state between movements (lessons, feedback, children), the parent of a subtask
    instruction: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    movement: str | None = Field(default=None, max_length=100)
    state: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSONType, nullable=False))
    parent_job_id: str | None = Field(default=None, max_length=40, index=True)
    # a subtask's job tree: its root (null on a root), how far below the root it is, and
    # on a root the movements begun in the whole tree, which share the root's budget
    root_job_id: str | None = Field(default=None, max_length=40)
    depth: int = Field(default=0, sa_column_kwargs={"server_default": text("0"), "nullable": False})
    tree_movements: int = Field(
        default=0, sa_column_kwargs={"server_default": text("0"), "nullable": False}
    )
    input: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSONType, nullable=False))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONType, nullable=True))
    error: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONType, nullable=True))
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=100)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    cancel_requested: bool = False
    # the cancel is the user's interrupt of the turn (`POST /sessions/{id}/interrupt`)
    interrupt_requested: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # a chat message the session's running turn takes at its next step, while queued
    steer: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
