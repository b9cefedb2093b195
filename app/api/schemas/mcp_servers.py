from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.api.schemas.webhooks import URL_PATTERN
from app.db.models import McpServerRow
from app.mcp.catalog import OfferedTool
from app.mcp.names import SERVER_NAME_PATTERN

Glob = str
NAME_DESCRIPTION = (
    "The server's name: its tools are offered as `mcp__<name>__<tool>`. The operator's "
    "stdio servers (STRATA_MCP_SERVERS_FILE) have names of their own, which a tenant's may "
    "not take."
)
HEADERS_DESCRIPTION = (
    "HTTP headers sent with every request to the server (tokens); stored, never shown back."
)


class ToolFilterBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[Glob] = Field(
        default_factory=list,
        max_length=100,
        description="Shell globs over the server's own tool names; empty allows every tool.",
    )
    deny: list[Glob] = Field(
        default_factory=list, max_length=100, description="Globs refused, whatever allows them."
    )


class McpServerCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "docs",
                    "url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer …"},
                    "tool_filter": {"allow": ["search*"]},
                    "trusted": True,
                }
            ]
        },
    )

    name: str = Field(pattern=SERVER_NAME_PATTERN, description=NAME_DESCRIPTION)
    url: str = Field(
        min_length=1,
        max_length=2000,
        pattern=URL_PATTERN,
        description="The server's Streamable HTTP endpoint. Hosts resolving to private, "
        "loopback, link-local, multicast or reserved addresses are refused unless "
        "STRATA_MCP_ALLOW_PRIVATE=true.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, max_length=20, description=HEADERS_DESCRIPTION
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Longest wait for one call, in seconds (default "
        "STRATA_MCP_CALL_TIMEOUT_SECONDS, at most STRATA_MCP_MAX_CALL_TIMEOUT_SECONDS).",
    )
    tool_filter: ToolFilterBody = Field(default_factory=ToolFilterBody)
    trusted: StrictBool = Field(
        default=False,
        description="Whether the tenant takes the server's tool annotations at their word: "
        "a trusted server's tool declaring `readOnlyHint` runs without a person's approval "
        "(its default policy is `allow`); every other tool of it, and every tool of an "
        "untrusted server, asks first.",
    )


class McpServerUpdate(BaseModel):
    """Only the fields sent change; `headers` and `tool_filter` are replaced whole."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"trusted": True}]})

    url: str | None = Field(default=None, min_length=1, max_length=2000, pattern=URL_PATTERN)
    headers: dict[str, str] | None = Field(
        default=None, max_length=20, description=HEADERS_DESCRIPTION
    )
    timeout_s: float | None = Field(default=None, gt=0)
    tool_filter: ToolFilterBody | None = None
    trusted: StrictBool | None = None


class McpServerPublic(BaseModel):
    name: str
    url: str
    header_names: list[str] = Field(description="The names of the stored headers (not values).")
    timeout_s: float | None
    tool_filter: ToolFilterBody
    trusted: bool
    last_error: str | None = Field(
        description="What the last refresh or call of the server found wrong; null when it "
        "went well."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: McpServerRow) -> McpServerPublic:
        stored: dict[str, Any] = row.tool_filter or {}
        return cls(
            name=row.name,
            url=row.url,
            header_names=sorted(row.headers or {}),
            timeout_s=row.timeout_s,
            tool_filter=ToolFilterBody(
                allow=list(stored.get("allow") or []), deny=list(stored.get("deny") or [])
            ),
            trusted=row.trusted,
            last_error=row.last_error,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class McpServerList(BaseModel):
    data: list[McpServerPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next page (by name); null on the last page."
    )


class McpToolPublic(BaseModel):
    name: str = Field(description="The tool's name as the model sees it.")
    tool: str = Field(description="The tool's name on its server.")
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = Field(
        description="The server's hints (`read_only_hint`, `idempotent_hint` …)."
    )

    @classmethod
    def of(cls, offered: OfferedTool) -> McpToolPublic:
        return cls(
            name=offered.name,
            tool=offered.tool.name,
            description=offered.tool.description,
            input_schema=offered.tool.input_schema,
            annotations=offered.tool.annotations,
        )


class McpRefresh(BaseModel):
    server: str
    tools: list[McpToolPublic] = Field(description="The tools the model would be offered.")
