"""Memory search: the tenant's memory by words (`GET /memory/search`), and the search box of
a session's memory panel (`GET /sessions/{id}/memory/search`); every hit links to its turn
(the session page's detail look-up at the hit's time)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.console.api import ApiError, PublicApi
from app.console.web import Api, Templates

router = APIRouter(prefix="/console/memory")


async def search_hits(api: PublicApi, path: str, q: str, **params: str) -> dict[str, Any]:
    """The hits of a search for `q` at `path` (none asked when `q` is empty), or what the
    API said about the query (a query without a letter or digit is 422)."""
    if not q:
        return {"q": "", "hits": None, "problem": None}
    wanted = {name: value for name, value in params.items() if value}
    try:
        found = await api.get(path, q=q, **wanted)
    except ApiError as exc:
        if exc.status != 422:
            raise
        return {"q": q, "hits": None, "problem": exc.detail}
    return {"q": q, "hits": found["data"], "problem": None}


@router.get("")
async def search(request: Request, api: Api, templates: Templates) -> Response:
    q = request.query_params.get("q", "").strip()
    project = request.query_params.get("project", "").strip()
    return templates.page(
        request,
        "memory_search.html",
        search=await search_hits(api, "/memory/search", q, project=project),
        project=project,
    )
