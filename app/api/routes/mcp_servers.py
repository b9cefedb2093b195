"""A tenant's MCP servers (Streamable HTTP): their tools become the agent's (docs/mcp.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.deps import CurrentTenant, DatabaseDep, PageLimit, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.schemas.mcp_servers import (
    McpRefresh,
    McpServerCreate,
    McpServerList,
    McpServerPublic,
    McpServerUpdate,
    McpToolPublic,
)
from app.domain.errors import McpUnreachableError, UpstreamFailed
from app.mcp.names import SERVER_NAME_PATTERN
from app.services import mcp_servers as service
from app.services.webhook_targets import check_target

ALLOW = service.ALLOW_PRIVATE

router = APIRouter(
    prefix="/mcp-servers", tags=["mcp-servers"], responses=problem_responses(401, 503)
)

ServerName = Annotated[str, Path(pattern=SERVER_NAME_PATTERN, description="An MCP server's name.")]
NameCursor = Annotated[
    str | None,
    Query(pattern=SERVER_NAME_PATTERN, description="The `next_cursor` of the previous page."),
]


@router.post(
    "",
    status_code=201,
    name="create",
    summary="Register an MCP server",
    description="Its URL passes the same address check as a webhook's "
    "(STRATA_MCP_ALLOW_PRIVATE); nothing is called until a refresh or a turn uses it. "
    "409 when the name is taken.",
    responses=problem_responses(409, 413, 422),
)
async def create_server(
    body: McpServerCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    response: Response,
) -> McpServerPublic:
    url = await check_target(body.url, allow_private=settings.mcp_allow_private, setting=ALLOW)
    fields = service.ServerFields(
        url=url,
        headers=body.headers,
        timeout_s=body.timeout_s,
        tool_filter=body.tool_filter.model_dump(),
        trusted=body.trusted,
    )
    row = await database.write(
        lambda db: service.create_server(db, settings, tenant, body.name, fields)
    )
    response.headers["Location"] = f"/mcp-servers/{row.name}"
    return McpServerPublic.of(row)


@router.get(
    "",
    name="list",
    summary="List the tenant's MCP servers, by name",
    description=(
        "A page of `limit` servers after the name in `after`, each with its "
        "header names (never their values) and `last_error`."
    ),
    responses=problem_responses(422),
)
async def list_servers(
    db: SessionDep, tenant: CurrentTenant, limit: PageLimit, after: NameCursor = None
) -> McpServerList:
    page = await service.list_servers(db, tenant, limit=limit, after=after)
    return McpServerList(
        data=[McpServerPublic.of(r) for r in page.data], next_cursor=page.next_cursor
    )


@router.get(
    "/{name}",
    name="get",
    summary="Get an MCP server (without its headers' values)",
    description=(
        "The server's URL, header names, timeout, tool filter, trust and "
        "`last_error`; its tools are listed by a refresh."
    ),
    responses=problem_responses(404, 422),
)
async def get_server(name: ServerName, db: SessionDep, tenant: CurrentTenant) -> McpServerPublic:
    return McpServerPublic.of(await service.get_server(db, tenant, name))


@router.patch(
    "/{name}",
    name="update",
    summary="Change an MCP server's url, headers, timeout, tool filter or trust",
    description="A change reaches a session's tools at its next segment.",
    responses=problem_responses(404, 413, 422),
)
async def update_server(
    name: ServerName,
    body: McpServerUpdate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> McpServerPublic:
    url = body.url
    if url is not None:  # resolved before the write, never inside it
        url = await check_target(url, allow_private=settings.mcp_allow_private, setting=ALLOW)
    fields = service.ServerFields(
        url=url,
        headers=body.headers,
        timeout_s=body.timeout_s,
        timeout_sent="timeout_s" in body.model_fields_set,
        tool_filter=body.tool_filter.model_dump() if body.tool_filter is not None else None,
        trusted=body.trusted,
    )
    row = await database.write(lambda db: service.update_server(db, settings, tenant, name, fields))
    return McpServerPublic.of(row)


@router.delete(
    "/{name}",
    status_code=204,
    name="delete",
    summary="Delete an MCP server",
    description=(
        "Sessions that attach it are offered none of its tools from their next "
        "segment on; 204 with no body."
    ),
    responses=problem_responses(404, 422),
)
async def delete_server(name: ServerName, database: DatabaseDep, tenant: CurrentTenant) -> Response:
    await database.write(lambda db: service.delete_server(db, tenant, name))
    return Response(status_code=204)


@router.post(
    "/{name}/refresh",
    name="refresh",
    summary="Connect to an MCP server and list its tools as the model will see them",
    description="502 `mcp-unreachable` when the server cannot be reached or answers "
    "something that is not MCP in time, 502 `mcp-auth-failed` when it refuses the "
    "credentials of its `headers` (HTTP 401 or 403). The outcome is kept as the server's "
    "`last_error`.",
    responses=problem_responses(404, 422, 502),
)
async def refresh_server(
    name: ServerName,
    db: SessionDep,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> McpRefresh:
    row = await service.get_server(db, tenant, name)
    try:
        tools = await service.list_offered(settings, row)
    except UpstreamFailed as exc:
        error = exc.detail if isinstance(exc, McpUnreachableError) else f"auth: {exc.detail}"
        await database.write(lambda w: service.record_status(w, tenant, name, error))
        raise
    await database.write(lambda w: service.record_status(w, tenant, name, None))
    return McpRefresh(server=name, tools=[McpToolPublic.of(tool) for tool in tools])
