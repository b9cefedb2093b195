from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.db.types import JSONType, UTCDateTime, utcnow


class Session(SQLModel, table=True):
    """One agent conversation. The counters make appends O(1) and race-free."""

    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("tenant", "source", "external_id", name="uq_sessions_external"),
        Index("ix_sessions_project", "tenant", "project"),
    )

    id: str = Field(primary_key=True, max_length=40)
    tenant: str = Field(index=True, max_length=100)
    title: str | None = Field(default=None, max_length=500)
    system_prompt: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    model: str | None = Field(default=None, max_length=200)
    metadata_: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSONType, nullable=False)
    )
    last_seq: int = Field(default=0)
    current_turn: int = Field(default=0)
    current_segment: int = Field(default=0)
    tools: list[str] | None = Field(default=None, sa_column=Column(JSONType, nullable=True))
    # the MCP servers attached to it: [{"server", "tools": [globs] | null}]; null: none
    mcp: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSONType, nullable=True)
    )
    # the session's layer of tool policy rules (`app.domain.tool_policy`), as stored
    # (`stored`); null: none
    tool_policy: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSONType, nullable=True)
    )
    # the tools its client offers and runs (`app.domain.client_tools`); null: none
    client_tools: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSONType, nullable=True)
    )
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    # the task reminder's state: main-thread LLM requests so far, and the request
    # numbers of the last task write and of the last reminder (0 = never)
    llm_requests: int = 0
    last_task_write_request: int = 0
    last_reminder_request: int = 0
    # chains: a continuation, a merge target, a subagent's parent
    continues_from: str | None = Field(default=None, max_length=40, index=True)
    merged_into: str | None = Field(default=None, max_length=40, index=True)
    parent_session_id: str | None = Field(default=None, max_length=40, index=True)
    # a fork: the session whose log it reads up to `fork_seq` (`app.domain.lineage`)
    forked_from: str | None = Field(default=None, max_length=40, index=True)
    fork_seq: int | None = None
    # which items its log is made of, once it was forked or rewound; null: its own, whole
    lineage: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONType, nullable=True))
    # a session mirrored from another agent (Claude Code): its own id and project folder
    source: str = Field(default="strata", max_length=20)
    external_id: str | None = Field(default=None, max_length=200)
    project: str | None = Field(default=None, max_length=1000)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
