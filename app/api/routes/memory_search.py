"""Full-text search of memory: a tenant's, or a session's chain's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from app.api.deps import CurrentTenant, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.memory import SearchHitPublic, SearchList
from app.services import memory_search as service
from app.settings import Settings

router = APIRouter(tags=["memory"], responses=problem_responses(401, 503))

_SEARCH_DESCRIPTION = (
    'The turns whose words hold every word and `"quoted phrase"` of `q` (case and accents '
    "ignored, no stemming), in their summary (L1), their user and assistant text (L2) or a "
    "tool input, tool output or system message (L3), ranked by how often they hold the "
    "words (`ts_rank` on PostgreSQL, occurrences on SQLite), best first; when more match than "
    "`STRATA_MEMORY_SEARCH_RANK_WINDOW`, the newest of them. Nothing in `q` is an operator: "
    "quotes only group a phrase, every other character is a word's or a separator. Each "
    "hit is one line; `time` goes to the detail look-up. `limit` is capped by "
    "`STRATA_MEMORY_SEARCH_LIMIT_MAX`. 422 when `q` holds no letter or digit."
)
Q = Annotated[str, Query(min_length=1, max_length=500, description="Words and phrases.")]
Since = Annotated[
    AwareDatetime | None, Query(description="Only turns that ended at or after this moment.")
]
Until = Annotated[AwareDatetime | None, Query(description="Only turns that ended before it.")]
Limit = Annotated[int | None, Query(ge=1, le=1000, description="Hits at most (server caps it).")]


def _public(hits: list[service.SearchHit], settings: Settings) -> SearchList:
    return SearchList(
        data=[
            SearchHitPublic(
                time=f"{hit.ended_at.astimezone(settings.zone):%Y-%m-%d %H:%M:%S}",
                ended_at=hit.ended_at,
                session_id=hit.session_id,
                turn=hit.turn,
                layer=hit.layer.value,
                line=hit.line,
            )
            for hit in hits
        ]
    )


@router.get(
    "/memory/search",
    name="search",
    summary="Search the memory of every session of the tenant",
    description=_SEARCH_DESCRIPTION
    + " `project` keeps the sessions filed under that folder (a Claude Code session's "
    "project: its git root or its folder), under a folder above it or inside it. Turns a "
    "rewind of their session reverted are left out.",
    responses=problem_responses(422),
)
async def search(
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    q: Q,
    project: Annotated[
        str | None, Query(min_length=1, max_length=1000, description="A project's folder.")
    ] = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = None,
) -> SearchList:
    request = service.SearchRequest(q, project, _utc(since), _utc(until), limit)
    hits = await service.search(db, tenant, request, service.SearchLimits.of(settings))
    return _public(hits, settings)


@router.get(
    "/sessions/{session_id}/memory/search",
    name="search_chain",
    summary="Search the memory of a session's chain",
    description=_SEARCH_DESCRIPTION
    + " The chain is the session, its predecessors and the sessions merged into them, as "
    "their memory holds them: a fork's includes its parent's turns up to the fork point, "
    "and turns a rewind reverted are left out.",
    responses=problem_responses(404, 422),
)
async def search_chain(
    session_id: SessionId,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    q: Q,
    since: Since = None,
    until: Until = None,
    limit: Limit = None,
) -> SearchList:
    request = service.SearchRequest(q, None, _utc(since), _utc(until), limit)
    limits = service.SearchLimits.of(settings)
    hits = await service.search(db, tenant, request, limits, session_id=session_id)
    return _public(hits, settings)


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None
