"""The MCP tools of a turn: its session's (and its job's, its movement's) attached
servers, their tools listed when the segment starts and kept for it, and the job's
connections (`McpPool`), closed with the job.

A segment's list is recorded in the log as a durable `mcp.tools_listed` event (its
segment, the attachments, each tool as listed; never sent to the model), and every turn
of the segment takes its tools from there, in any process: the request's tool prefix
never shifts under the prompt cache, and a change to a server's tools reaches the next
segment. A server that cannot list its tools at a segment's start is left out of that
turn (its failure goes to the job's `mcp.server_status` event) and nothing is recorded,
so the next turn lists again and the segment keeps the first complete list. Without
attached servers nothing is read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, Session
from app.db.repositories.events import EventRepository
from app.engine.tools import ToolRegistry
from app.mcp.catalog import OfferedTool
from app.mcp.client import ToolInfo
from app.mcp.errors import McpFailure
from app.mcp.names import NameClash
from app.mcp.pool import McpPool, ServerSource
from app.services.events import record_event
from app.services.leases import JobDatabase
from app.services.live import LiveHub
from app.services.mcp_attach import (
    AttachedServer,
    Attachment,
    TooManyTools,
    attached_servers,
    list_attached,
    offered_names,
    registry_tools,
)
from app.settings import Settings
from app.tools.sandbox import Confinement

logger = logging.getLogger("strata.mcp")


@dataclass
class TurnMcp:
    """A turn's registry (the server's tools and its MCP ones), the MCP names it offers,
    and the pool to close at the job's end (None: no server attached)."""

    tools: ToolRegistry
    names: list[str]
    pool: McpPool | None = None

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


def _status_sender(hub: LiveHub, job: Job) -> Callable[[str, str, str], None]:
    def send(server: str, state: str, detail: str) -> None:
        data = {"job_id": job.id, "server": server, "state": state, "detail": detail}
        hub.transient("mcp.server_status", job.session_id, job.id, data)

    return send


def job_attachments(job: Job) -> list[dict[str, Any]]:
    """The MCP servers a piece job attaches itself (`POST /jobs` `mcp`)."""
    return list(job.input.get("mcp") or ()) if job.input else []


TOOLS_LISTED = "mcp.tools_listed"


async def turn_mcp(
    settings: Settings,
    database: Database,
    hub: LiveHub,
    tools: ToolRegistry,
    job: Job,
    session: Session,
    *,
    pool: McpPool | None = None,
    allowed: Sequence[str] | None = None,
    own: Sequence[dict[str, Any]] = (),
) -> TurnMcp:
    """The turn's tools. `pool`: the job's, which its caller closes (None: the turn's
    own, closed by `TurnMcp.close`). The session's servers' tools are offered as
    `allowed` names them (MCP tools by glob; a movement's `allowed_tools`), else as the
    session's `tools` does; the servers `own` attaches (a job's, a movement's: they
    replace the session's attachment of the same server) are offered whole, within
    their attachment's globs."""
    attachments = {a["server"]: a for a in session.mcp or ()}
    attachments.update({a["server"]: a for a in own})
    if not attachments:
        return TurnMcp(tools, [])
    mine = pool is None
    if pool is None:
        pool = McpPool(Confinement.of(settings))
    pool.on_status = _status_sender(hub, job)
    listed = await _segment_tools(
        settings, database, pool, job, session, list(attachments.values())
    )
    globs = session.tools if allowed is None else allowed
    owned = {a["server"] for a in own}
    names = [
        tool.name
        for tool, source in listed
        if source.name in owned or tool.name in offered_names([(tool, source)], globs)
    ]
    return TurnMcp(tools.extended(registry_tools(listed, pool)), names, pool if mine else None)


async def _segment_tools(
    settings: Settings,
    database: Database,
    pool: McpPool,
    job: Job,
    session: Session,
    stored: list[dict[str, Any]],
) -> list[tuple[OfferedTool, ServerSource]]:
    """The segment's tools as recorded, else listed now (and recorded when complete)."""
    attachments = [Attachment.of(a) for a in stored]
    async with database.read() as db:
        servers = await attached_servers(db, settings, job.tenant, attachments, strict=False)
        recorded = await EventRepository(db).newest_of_type(job.session_id, TOOLS_LISTED)
    segment = session.current_segment
    if recorded is not None and recorded.data.get("segment") == segment:
        if recorded.data.get("attachments") == stored:
            return _recorded_tools(recorded.data, servers)
    listed, complete = await _list(settings, pool, job, servers)
    if complete and len(servers) == len(attachments):
        data = {
            "job_id": job.id,
            "segment": segment,
            "attachments": stored,
            "tools": [_listed(tool) for tool, _ in listed],
        }

        async def record(db: AsyncSession) -> None:
            await record_event(db, job.session_id, TOOLS_LISTED, data, job_id=job.id)

        await JobDatabase(database, job).write(record)
    return listed


def _listed(tool: OfferedTool) -> dict[str, Any]:
    info = tool.tool
    return {
        "name": tool.name,
        "server": tool.server,
        "tool": info.name,
        "description": info.description,
        "input_schema": info.input_schema,
        "annotations": info.annotations,
    }


def _recorded_tools(
    data: dict[str, Any], servers: Sequence[AttachedServer]
) -> list[tuple[OfferedTool, ServerSource]]:
    """The tools an `mcp.tools_listed` event recorded, with how to reach their servers
    now (the tools of a server since deleted are left out: a call could not reach it)."""
    sources = {server.source.name: server.source for server in servers}
    found: list[tuple[OfferedTool, ServerSource]] = []
    for tool in data.get("tools") or ():
        source = sources.get(tool["server"])
        if source is None:
            continue
        hints = dict(tool.get("annotations") or {})
        info = ToolInfo(
            name=tool["tool"],
            description=tool.get("description") or "",
            input_schema=dict(tool.get("input_schema") or {"type": "object"}),
            read_only=bool(hints.get("read_only_hint")),
            idempotent=bool(hints.get("idempotent_hint")),
            annotations=hints,
        )
        found.append((OfferedTool(tool["name"], tool["server"], info), source))
    return found


async def _list(
    settings: Settings, pool: McpPool, job: Job, servers: Sequence[AttachedServer]
) -> tuple[list[tuple[OfferedTool, ServerSource]], bool]:
    listed: list[tuple[OfferedTool, ServerSource]] = []
    seen: set[str] = set()
    complete = True
    for server in servers:
        try:
            found = await list_attached([server], pool, settings.mcp_max_tools)
        except (McpFailure, NameClash, TooManyTools) as exc:
            logger.warning("MCP server %s left out of job %s: %s", server.source.name, job.id, exc)
            complete = False
            continue
        for tool, source in found:
            if tool.name not in seen and len(listed) < settings.mcp_max_tools:
                seen.add(tool.name)
                listed.append((tool, source))
    return listed, complete
