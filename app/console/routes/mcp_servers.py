"""MCP servers: the tenant's servers, a new one (its headers are sent, never shown back),
a server's page with its tools as the model sees them after a refresh (or why the refresh
failed), and deleting one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import FormData

from app.console.api import ApiError, PublicApi
from app.console.live import q
from app.console.web import Api, Form, PageSize, Templates, text

router = APIRouter(prefix="/console/mcp-servers")


def _globs(form: FormData, name: str) -> list[str]:
    return [glob.strip() for glob in text(form, name).split(",") if glob.strip()]


def _headers(form: FormData) -> dict[str, str]:
    """One `Name: value` a line; a line that is no such pair is a 422 naming it."""
    headers: dict[str, str] = {}
    for line in text(form, "headers").splitlines():
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ApiError(422, {"detail": f"headers: {line.strip()[:40]!r} is not 'Name: value'"})
        headers[name.strip()] = value.strip()
    return headers


def server_body(form: FormData) -> dict[str, Any]:
    """The new server as the API takes it; the API checks every value (a timeout that is
    no number is its 422)."""
    body: dict[str, Any] = {
        "name": text(form, "name"),
        "url": text(form, "url"),
        "headers": _headers(form),
        "tool_filter": {"allow": _globs(form, "allow"), "deny": _globs(form, "deny")},
        "trusted": text(form, "trusted") == "yes",
    }
    if text(form, "timeout_s"):
        body["timeout_s"] = text(form, "timeout_s")
    return body


@router.get("")
async def servers(request: Request, api: Api, templates: Templates, page: PageSize) -> Response:
    listed = await api.get("/mcp-servers", limit=page, after=request.query_params.get("after"))
    return templates.page(
        request, "mcp_servers.html", servers=listed["data"], next_cursor=listed["next_cursor"]
    )


@router.post("")
async def create_server(api: Api, form: Form) -> Response:
    created = await api.send("POST", "/mcp-servers", server_body(form))
    return RedirectResponse(f"/console/mcp-servers/{q(created['name'])}", status_code=303)


async def _server_page(
    request: Request,
    api: PublicApi,
    templates: Templates,
    name: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    problem: dict[str, Any] | None = None,
) -> Response:
    server = await api.get(f"/mcp-servers/{q(name)}")
    return templates.page(request, "mcp_server.html", server=server, tools=tools, problem=problem)


@router.get("/{name}")
async def server_page(name: str, request: Request, api: Api, templates: Templates) -> Response:
    return await _server_page(request, api, templates, name)


@router.post("/{name}/refresh")
async def refresh(
    name: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    """The server's tools as the model would see them; a server that cannot be reached or
    refuses the credentials (the API's 502) is shown with the API's problem document."""
    try:
        refreshed = await api.send("POST", f"/mcp-servers/{q(name)}/refresh")
    except ApiError as exc:
        if exc.status != 502:
            raise
        return await _server_page(request, api, templates, name, problem=exc.problem)
    return await _server_page(request, api, templates, name, tools=refreshed["tools"])


@router.post("/{name}/delete")
async def delete_server(name: str, api: Api, form: Form) -> Response:
    """Deletes only with the form's confirmation ticked (the browser requires it too)."""
    if text(form, "confirm") != "yes":
        return RedirectResponse(f"/console/mcp-servers/{q(name)}", status_code=303)
    await api.send("DELETE", f"/mcp-servers/{q(name)}")
    return RedirectResponse("/console/mcp-servers", status_code=303)
