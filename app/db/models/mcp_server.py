from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from app.db.types import JSONType, UTCDateTime, utcnow


class McpServerRow(SQLModel, table=True):
    """A tenant's MCP server reached over Streamable HTTP (`app.mcp`). `headers` carry its
    credentials and are never shown back."""

    __tablename__ = "mcp_servers"

    tenant: str = Field(primary_key=True, max_length=100)
    name: str = Field(primary_key=True, max_length=32)
    url: str = Field(sa_column=Column(Text, nullable=False))
    headers: dict[str, str] = Field(
        default_factory=dict, sa_column=Column(JSONType, nullable=False)
    )
    timeout_s: float | None = None
    # {"allow": [globs], "deny": [globs]} over the server's own tool names
    tool_filter: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column(JSONType, nullable=False)
    )
    trusted: bool = False
    # what the last refresh or call found wrong (None: it went well)
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
