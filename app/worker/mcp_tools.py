"""The MCP tools of a turn: its session's attached servers, their tools listed when the
segment starts and kept for it (`SegmentTools`), and the job's connections (`McpPool`),
closed with the job.

A server that cannot list its tools at a segment's start is left out of that turn (its
failure goes to the job's `mcp.server_status` event) and listed again at the next turn,
so the segment keeps the first complete list. Without attached servers nothing is read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.db.engine import Database
from app.db.models import Job, Session
from app.engine.tools import ToolRegistry
from app.mcp.catalog import OfferedTool
from app.mcp.errors import McpFailure
from app.mcp.names import NameClash
from app.mcp.pool import McpPool, ServerSource
from app.services.live import LiveHub
from app.services.mcp_attach import (
    Attachment,
    SegmentTools,
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


async def turn_mcp(
    settings: Settings,
    database: Database,
    hub: LiveHub,
    segments: SegmentTools,
    tools: ToolRegistry,
    job: Job,
    session: Session,
    *,
    pool: McpPool | None = None,
    allowed: Sequence[str] | None = None,
) -> TurnMcp:
    """The turn's tools. `pool`: the job's, which its caller closes (None: the turn's
    own, closed by `TurnMcp.close`); `allowed`: the names a movement allows (MCP tools by
    glob), else the session's `tools`."""
    if not session.mcp:
        return TurnMcp(tools, [])
    own = pool is None
    if pool is None:
        pool = McpPool(Confinement.of(settings))
    send = _status_sender(hub, job)
    pool.on_status = send
    key = (job.session_id, session.current_segment, json.dumps(session.mcp, sort_keys=True))
    listed = segments.get(key)
    if listed is None:
        listed, complete = await _list(settings, database, pool, job, session)
        if complete:
            segments.put(key, listed)
    names = offered_names(listed, session.tools if allowed is None else allowed)
    return TurnMcp(tools.extended(registry_tools(listed, pool)), names, pool if own else None)


async def _list(
    settings: Settings, database: Database, pool: McpPool, job: Job, session: Session
) -> tuple[list[tuple[OfferedTool, ServerSource]], bool]:
    attachments = [Attachment.of(a) for a in session.mcp or ()]
    async with database.read() as db:
        servers = await attached_servers(db, settings, job.tenant, attachments, strict=False)
    listed: list[tuple[OfferedTool, ServerSource]] = []
    seen: set[str] = set()
    complete = len(servers) == len(attachments)
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
