"""The timeline of a session's chain: its turns by the time they ended."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import CurrentTenant, PageLimit, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.turns import TurnList, TurnPublic
from app.services import turns as service

router = APIRouter(
    prefix="/sessions/{session_id}", tags=["memory"], responses=problem_responses(401, 503)
)


@router.get(
    "/turns",
    name="turns",
    summary="The turns of the session's chain, newest first, by the time they ended",
    description="The turns the detail look-up reads (this session's, its predecessors', "
    "and those of sessions merged into them; a fork's include its parent's up to the fork "
    "point), each with its time as "
    "`GET /sessions/{session_id}/detail/{time}` takes it and a short preview. Turns a "
    "rewind reverted are listed, `reverted`.",
    responses=problem_responses(404, 422),
)
async def list_turns(
    session_id: SessionId,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    limit: PageLimit,
    after: Annotated[
        str | None,
        Query(
            max_length=40,
            pattern=service.CURSOR_PATTERN,
            description="`next_cursor` of the previous page.",
        ),
    ] = None,
) -> TurnList:
    page = await service.timeline(
        db,
        tenant,
        session_id,
        limit=limit,
        after=after,
        preview_chars=settings.turn_preview_chars,
    )
    return TurnList(
        data=[
            TurnPublic(
                session_id=t.session_id,
                turn=t.turn,
                ended_at=t.ended_at,
                time=f"{t.ended_at.astimezone(settings.zone):%H:%M:%S}",
                preview=t.preview,
                reverted=t.reverted,
            )
            for t in page.data
        ],
        next_cursor=page.next_cursor,
    )
