"""A tenant's MCP servers: the registry (like webhook subscriptions) and its refresh.

A server's URL has passed the webhook targets' address check before it is written
(`check_target` with STRATA_MCP_ALLOW_PRIVATE), and passes it again each time a connection
opens, which then connects to the address that passed (`remote_of`). Its `headers` are
stored and sent, never shown. A refresh connects, lists the tools and answers them as the
model will see them, or the failure as `mcp-unreachable` / `mcp-auth-failed`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import McpServerRow
from app.db.repositories.mcp_servers import McpServerRepository
from app.db.types import utcnow
from app.domain.errors import (
    Conflict,
    InvalidInput,
    McpAuthFailedError,
    McpUnreachableError,
    NotFound,
)
from app.mcp.catalog import OfferedTool, offered
from app.mcp.client import RemoteServer, Timeouts, connected
from app.mcp.errors import McpAuthFailed, McpFailure
from app.mcp.names import NameClash, ToolFilter
from app.mcp.stdio import load_operator_servers
from app.services.pagination import Page, page_of
from app.services.webhook_targets import checked_address
from app.settings import Settings


@dataclass(frozen=True)
class ServerFields:
    """What a POST sets, or a PATCH changes (a field None there: unchanged)."""

    url: str | None = None
    headers: dict[str, str] | None = None
    timeout_s: float | None = None
    timeout_sent: bool = False
    tool_filter: dict[str, list[str]] | None = None
    trusted: bool | None = None


def tool_filter_of(row: McpServerRow) -> ToolFilter:
    stored: dict[str, Any] = row.tool_filter or {}
    return ToolFilter(tuple(stored.get("allow") or ()), tuple(stored.get("deny") or ()))


def timeouts_of(settings: Settings, row: McpServerRow | None = None) -> Timeouts:
    call = row.timeout_s if row is not None and row.timeout_s else settings.mcp_call_timeout_seconds
    return Timeouts(connect=settings.mcp_connect_timeout_seconds, call=call)


ALLOW_PRIVATE = "STRATA_MCP_ALLOW_PRIVATE"


def remote_of(row: McpServerRow, settings: Settings) -> RemoteServer:
    """How to reach the server: each connection checks its URL's address again (what a
    name resolves to may have changed since it was written) and connects to the address
    that passed."""
    check = functools.partial(
        checked_address, allow_private=settings.mcp_allow_private, setting=ALLOW_PRIVATE
    )
    return RemoteServer(name=row.name, url=row.url, headers=dict(row.headers or {}), check=check)


def _check_timeout(settings: Settings, timeout_s: float | None) -> float | None:
    if timeout_s is not None and timeout_s > settings.mcp_max_call_timeout_seconds:
        raise InvalidInput(
            f"timeout_s: at most {settings.mcp_max_call_timeout_seconds:g} seconds "
            "(STRATA_MCP_MAX_CALL_TIMEOUT_SECONDS)",
            field="timeout_s",
        )
    return timeout_s


async def create_server(
    db: AsyncSession, settings: Settings, tenant: str, name: str, fields: ServerFields
) -> McpServerRow:
    """`fields.url` has passed `check_target`."""
    repo = McpServerRepository(db)
    if name in load_operator_servers(settings.mcp_servers_file):
        raise Conflict(f"MCP server {name!r} is the operator's (STRATA_MCP_SERVERS_FILE)")
    if await repo.get(tenant, name) is not None:
        raise Conflict(f"MCP server {name!r} exists already; PATCH or DELETE it")
    if await repo.count(tenant) >= settings.mcp_max_servers:
        raise Conflict(
            f"this tenant has {settings.mcp_max_servers} MCP servers, as many as it may "
            "(STRATA_MCP_MAX_SERVERS); delete one first"
        )
    assert fields.url is not None
    row = McpServerRow(
        tenant=tenant,
        name=name,
        url=fields.url,
        headers=fields.headers or {},
        timeout_s=_check_timeout(settings, fields.timeout_s),
        tool_filter=fields.tool_filter or {"allow": [], "deny": []},
        trusted=bool(fields.trusted),
    )
    return await repo.save(row)


async def get_server(db: AsyncSession, tenant: str, name: str) -> McpServerRow:
    row = await McpServerRepository(db).get(tenant, name)
    if row is None:
        raise NotFound(f"MCP server {name!r} does not exist", resource="mcp-server")
    return row


async def list_servers(
    db: AsyncSession, tenant: str, *, limit: int, after: str | None
) -> Page[McpServerRow]:
    rows = await McpServerRepository(db).list_page(tenant, limit=limit + 1, after=after)
    return page_of(rows, limit, lambda row: row.name)


async def update_server(
    db: AsyncSession, settings: Settings, tenant: str, name: str, fields: ServerFields
) -> McpServerRow:
    """Only the fields sent change (a new `url` has passed `check_target`); `headers`
    and `tool_filter` are replaced whole."""
    row = await get_server(db, tenant, name)
    if fields.url is not None:
        row.url = fields.url
    if fields.headers is not None:
        row.headers = fields.headers
    if fields.timeout_sent:
        row.timeout_s = _check_timeout(settings, fields.timeout_s)
    if fields.tool_filter is not None:
        row.tool_filter = fields.tool_filter
    if fields.trusted is not None:
        row.trusted = fields.trusted
    row.updated_at = utcnow()
    return await McpServerRepository(db).save(row)


async def delete_server(db: AsyncSession, tenant: str, name: str) -> None:
    repo = McpServerRepository(db)
    await repo.remove(await get_server(db, tenant, name))


async def record_status(db: AsyncSession, tenant: str, name: str, error: str | None) -> None:
    """What the last refresh or call found (None: it went well)."""
    row = await McpServerRepository(db).get(tenant, name)
    if row is not None and row.last_error != error:
        row.last_error = error
        await McpServerRepository(db).save(row)


async def list_offered(settings: Settings, row: McpServerRow) -> list[OfferedTool]:
    """The server's tools as the model would see them; the failure, typed, if it has none
    to show."""
    try:
        async with connected(remote_of(row, settings), timeouts_of(settings, row)) as connection:
            tools = await connection.list_tools()
    except McpAuthFailed as exc:
        raise McpAuthFailedError(exc.detail, server=row.name) from exc
    except McpFailure as exc:
        raise McpUnreachableError(f"{exc.kind}: {exc.detail}", server=row.name) from exc
    try:
        return offered(row.name, tools, tool_filter_of(row))
    except NameClash as exc:
        raise InvalidInput(f"tool_filter: {exc}", field="tool_filter") from exc
