"""MCP servers attached to a session: which servers, which of their tools, and the tools
a turn offers from them.

An attachment names a server (the tenant's, or the operator's stdio one) and optionally
globs over its own tool names. It is checked when written: the server exists, its tools
are listed, and the names the model would see must neither collide
nor number more than STRATA_MCP_MAX_TOOLS. A turn lists them again when its segment
starts and keeps that list for the segment (`app.worker.mcp_tools`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import McpServerRow, Session
from app.db.repositories.mcp_servers import McpServerRepository
from app.domain.errors import InvalidInput, McpAuthFailedError, McpUnreachableError
from app.engine.tools import Tool
from app.mcp.catalog import OfferedTool, offered
from app.mcp.errors import McpAuthFailed, McpFailure
from app.mcp.names import MAX_NAME_CHARS, NameClash, ToolFilter, is_mcp_name, matches_any
from app.mcp.pool import McpPool, ServerSource
from app.mcp.stdio import OperatorServer, load_operator_servers
from app.mcp.tools import mcp_tool
from app.services.mcp_servers import remote_of, timeouts_of, tool_filter_of
from app.settings import Settings
from app.tools.sandbox import Confinement


@dataclass(frozen=True)
class Attachment:
    server: str
    tools: tuple[str, ...] | None = None

    @classmethod
    def of(cls, stored: dict[str, Any]) -> Attachment:
        tools = stored.get("tools")
        return cls(str(stored["server"]), tuple(tools) if tools is not None else None)

    def stored(self) -> dict[str, Any]:
        return {"server": self.server, "tools": list(self.tools) if self.tools else None}


@functools.lru_cache(maxsize=4)
def _operator_servers(path: Path | None) -> dict[str, OperatorServer]:
    return load_operator_servers(path)


def operator_servers(settings: Settings) -> dict[str, OperatorServer]:
    """The operator's stdio servers (STRATA_MCP_SERVERS_FILE), read once per file."""
    return _operator_servers(settings.mcp_servers_file)


@dataclass(frozen=True)
class AttachedServer:
    source: ServerSource
    tool_filter: ToolFilter
    globs: tuple[str, ...] | None


async def attached_servers(
    db: AsyncSession,
    settings: Settings,
    tenant: str,
    attachments: Sequence[Attachment],
    *,
    strict: bool = True,
) -> list[AttachedServer]:
    """How to reach each attached server; 422 for one that is unknown (not `strict`: a
    server deleted since it was attached is left out). An untrusted server's tools ask a
    person before each call (`mcp_default`)."""
    operator = operator_servers(settings)
    names = [a.server for a in attachments]
    if len(set(names)) != len(names):
        raise InvalidInput("mcp: a server is attached twice", field="mcp")
    rows: dict[str, McpServerRow] = {
        row.name: row
        for row in await McpServerRepository(db).named(
            tenant, [n for n in names if n not in operator]
        )
    }
    servers: list[AttachedServer] = []
    for attachment in attachments:
        name = attachment.server
        if name in operator:
            found = operator[name]
            source = ServerSource(
                name, timeouts_of(settings), operator=found, trusted=found.trusted
            )
            tool_filter = ToolFilter()
        elif name in rows:
            row = rows[name]
            remote = remote_of(row, settings)
            source = ServerSource(
                name, timeouts_of(settings, row), remote=remote, trusted=row.trusted
            )
            tool_filter = tool_filter_of(row)
        elif not strict:
            continue
        else:
            raise InvalidInput(f"mcp: no MCP server is named {name!r}", field="mcp")
        servers.append(AttachedServer(source, tool_filter, attachment.tools))
    return servers


class TooManyTools(ValueError):
    pass


async def list_attached(
    servers: Sequence[AttachedServer], pool: McpPool, max_tools: int
) -> list[tuple[OfferedTool, ServerSource]]:
    """Each server's tools as offered; NameClash, TooManyTools or an McpFailure."""
    tools: list[tuple[OfferedTool, ServerSource]] = []
    seen: dict[str, str] = {}
    for server in servers:
        try:
            connection = await pool.connection(server.source)
            listed = await connection.list_tools()
        except McpFailure as exc:
            pool.status(server.source.name, exc.kind, exc.detail)
            raise
        pool.status(server.source.name, "ok")
        for tool in offered(server.source.name, listed, server.tool_filter, server.globs):
            if tool.name in seen:
                raise NameClash(
                    f"{tool.name!r} names a tool of MCP server {seen[tool.name]!r} and one "
                    f"of {tool.server!r}"
                )
            seen[tool.name] = tool.server
            tools.append((tool, server.source))
    if len(tools) > max_tools:
        raise TooManyTools(
            f"the attached MCP servers offer {len(tools)} tools, more than "
            f"STRATA_MCP_MAX_TOOLS={max_tools}; narrow them with `tools` globs"
        )
    return tools


async def check_attachments(
    settings: Settings, servers: Sequence[AttachedServer], pool: McpPool
) -> None:
    """What attaching these servers would offer is offerable: 422 when names collide or
    there are too many tools, 502 when a server cannot list them."""
    try:
        await list_attached(servers, pool, settings.mcp_max_tools)
    except (NameClash, TooManyTools) as exc:
        raise InvalidInput(f"mcp: {exc}", field="mcp") from exc
    except McpAuthFailed as exc:
        raise McpAuthFailedError(exc.detail, server=exc.server) from exc
    except McpFailure as exc:
        raise McpUnreachableError(f"{exc.kind}: {exc.detail}", server=exc.server) from exc


async def check_session_attachments(
    database: Database, settings: Settings, tenant: str, attachments: Sequence[Attachment]
) -> list[dict[str, Any]]:
    """The attachments as a session stores them, once checked (see the module)."""
    if not attachments:
        return []
    async with database.read() as db:
        servers = await attached_servers(db, settings, tenant, attachments)
    pool = McpPool(Confinement.of(settings))
    try:
        await check_attachments(settings, servers, pool)
    finally:
        await pool.close()
    return [a.stored() for a in attachments]


def check_tool_names(tools: list[str] | None, known: Sequence[str]) -> None:
    """`tools` may name MCP tools by glob (`mcp__git__*`)."""
    if tools is None:
        return
    bad = [t for t in tools if is_mcp_name(t) and len(t) > MAX_NAME_CHARS]
    if bad:
        raise InvalidInput(f"tools: names too long: {bad}", field="tools")


def offered_names(
    tools: Sequence[tuple[OfferedTool, ServerSource]], session_tools: Sequence[str] | None
) -> list[str]:
    """The MCP tools a session's `tools` lets through (None: all)."""
    globs = None if session_tools is None else [t for t in session_tools if is_mcp_name(t)]
    return [tool.name for tool, _ in tools if matches_any(tool.name, globs)]


def registry_tools(
    tools: Sequence[tuple[OfferedTool, ServerSource]], pool: McpPool
) -> list[Tool[Any]]:
    return [mcp_tool(tool, source, pool) for tool, source in tools]


async def session_mcp_tools(
    db: AsyncSession, settings: Settings, tenant: str, session: Session
) -> list[tuple[Tool[Any], str]]:
    """The MCP tools a session's chat turns would offer now, with their servers' names:
    listed afresh, to be described (never called); a server that cannot list its tools
    is left out, as a turn leaves it out."""
    if not session.mcp:
        return []
    attachments = [Attachment.of(a) for a in session.mcp]
    servers = await attached_servers(db, settings, tenant, attachments, strict=False)
    pool = McpPool(Confinement.of(settings))
    listed: list[tuple[OfferedTool, ServerSource]] = []
    try:
        for server in servers:
            try:
                listed.extend(await list_attached([server], pool, settings.mcp_max_tools))
            except (McpFailure, NameClash, TooManyTools):
                continue
    finally:
        await pool.close()
    names = set(offered_names(listed, session.tools))
    return [
        (tool, source.name)
        for tool, (_, source) in zip(registry_tools(listed, pool), listed, strict=True)
        if tool.name in names
    ]
