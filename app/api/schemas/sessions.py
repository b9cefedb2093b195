from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.db.models import Job, Session
from app.domain.client_tools import ClientTool
from app.domain.sessions import SessionStatus
from app.domain.tool_policy import ToolPolicyRule
from app.domain.usage import Usage

__all__ = ["SessionStatus"]

ToolName = Annotated[str, Field(min_length=1, max_length=100)]
MCP_DESCRIPTION = (
    "MCP servers whose tools the agent is offered, as `mcp__<server>__<tool>`: each names a "
    "server (the tenant's, `/mcp-servers`, or the operator's) and optionally globs over its "
    "own tool names. Checked when written: the server is trusted, its tools listed, their "
    "names neither collide nor exceed STRATA_MCP_MAX_TOOLS. See docs/mcp.md."
)


class McpAttachment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    server: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    tools: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None,
        max_length=100,
        description="Shell globs over the server's own tool names; null offers them all.",
    )


SESSION_POLICY = (
    "The session's tool policy rules, an ordered list (the last match wins): the layer "
    "under the operator's and the tenant's, over a piece movement's; the jobs run in the "
    "session follow it too. See `GET /sessions/{session_id}/tools`."
)

CLIENT_TOOLS = (
    "Tools the session's client offers the model and runs itself: a call waits as an "
    "action of kind `client_tool` that `respond` answers. A name of this server's tools "
    "is a 422."
)


class SessionCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "title": "Release notes",
                    "system_prompt": "Be brief.",
                    "metadata": {"project": "strata"},
                }
            ]
        },
    )

    title: str | None = Field(default=None, max_length=500)
    system_prompt: str | None = Field(default=None, max_length=200_000)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolName] | None = Field(
        default=None,
        description="Tools the agent is offered; null offers every tool. MCP tools are "
        "named by glob (`mcp__git__*`).",
    )
    mcp: list[McpAttachment] = Field(
        default_factory=list, max_length=20, description=MCP_DESCRIPTION
    )
    tool_policy: list[ToolPolicyRule] = Field(default_factory=list, description=SESSION_POLICY)
    client_tools: list[ClientTool] = Field(default_factory=list, description=CLIENT_TOOLS)
    continues_from: str | None = Field(
        default=None,
        max_length=40,
        pattern=r"^ses_[0-9A-HJKMNP-TV-Z]{26}$",
        description=(
            "A predecessor session: this session's requests start with the memory block "
            "of the predecessor chain (its last 20 turns whole, older ones as summaries)."
        ),
    )


class SessionUpdate(BaseModel):
    """Only the fields sent are changed; `metadata`, `tools` and `tool_policy` are
    replaced whole."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"title": "Release notes (final)"}]}
    )

    title: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None
    tools: list[ToolName] | None = None
    mcp: list[McpAttachment] = Field(
        default_factory=list, max_length=20, description=MCP_DESCRIPTION
    )
    tool_policy: list[ToolPolicyRule] = Field(default_factory=list, description=SESSION_POLICY)
    client_tools: list[ClientTool] = Field(default_factory=list, description=CLIENT_TOOLS)


def usage_of(row: Session | Job) -> Usage:
    """The token counters a session or job row sums up."""
    return Usage(
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cache_read_input_tokens=row.cache_read_tokens,
        cache_creation_input_tokens=row.cache_creation_tokens,
    )


class SessionPublic(BaseModel):
    id: str
    title: str | None
    system_prompt: str | None
    model: str | None
    metadata: dict[str, Any]
    tools: list[str] | None
    mcp: list[McpAttachment] = Field(description=MCP_DESCRIPTION)
    tool_policy: list[ToolPolicyRule] = Field(description=SESSION_POLICY)
    client_tools: list[ClientTool] = Field(description=CLIENT_TOOLS)
    continues_from: str | None
    merged_into: str | None = Field(description="Set once merged: reads go through that session.")
    parent_session_id: str | None = Field(
        description="For a subagent's or subtask's session: the session that started it."
    )
    forked_from: str | None = Field(
        default=None,
        description="For a fork (`POST …/fork`): the session whose log it reads up to `fork_seq`.",
    )
    fork_seq: int | None = Field(
        default=None, description="For a fork: the last `seq` of its parent's log it reads."
    )
    source: str = Field(
        description="`strata`, or `claude-code` for a mirrored Claude Code session."
    )
    external_id: str | None = Field(description="The mirrored session's own id (Claude Code).")
    project: str | None = Field(description="The mirrored session's project folder (`cwd`).")
    status: SessionStatus = Field(
        description="`running` while a turn, compaction or piece movement of the session is "
        "queued or running; `waiting` when none is and a job waits for a human or its "
        "subtasks; else `idle`."
    )
    item_count: int = Field(description="Items in the event log (the last `seq`).")
    turn_count: int
    segment: int = Field(description="The current segment: what the next LLM request sees.")
    usage: Usage = Field(description="Tokens of every LLM request of this session, summed.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Session, status: SessionStatus) -> SessionPublic:
        return cls(
            id=row.id,
            title=row.title,
            system_prompt=row.system_prompt,
            model=row.model,
            metadata=row.metadata_,
            tools=row.tools,
            mcp=[McpAttachment.model_validate(a) for a in row.mcp or ()],
            tool_policy=[ToolPolicyRule.model_validate(rule) for rule in row.tool_policy or ()],
            client_tools=[ClientTool.model_validate(tool) for tool in row.client_tools or ()],
            continues_from=row.continues_from,
            merged_into=row.merged_into,
            parent_session_id=row.parent_session_id,
            forked_from=row.forked_from,
            fork_seq=row.fork_seq,
            source=row.source,
            external_id=row.external_id,
            project=row.project,
            status=status,
            item_count=row.last_seq,
            turn_count=row.current_turn,
            segment=row.current_segment,
            usage=usage_of(row),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class SessionList(BaseModel):
    data: list[SessionPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )
