from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import CurrentTenant, DatabaseDep, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.memory import (
    DetailEntryPublic,
    DetailList,
    MemoryCounts,
    MemoryPublic,
    MergeRequest,
    TurnDetailPublic,
)
from app.api.schemas.sessions import SessionPublic
from app.services import memory as service
from app.services.sessions import status_of
from app.services.summaries import enqueue_if_needed

router = APIRouter(
    prefix="/sessions/{session_id}", tags=["memory"], responses=problem_responses(401, 503)
)

TimeRef = Annotated[
    str,
    Path(
        max_length=60,
        description="`HH:MM:SS`, `HH:MM`, `HH:MM:SS-HH:MM:SS`, `HH:MM-HH:MM` or an ISO timestamp.",
    ),
]


@router.get(
    "/memory",
    name="get",
    summary="The memory block a continuation of this session starts with",
    description=(
        "The predecessor chain's last 20 turns whole (L2), older turns as one-line "
        "summaries (L1), times as `[HH:MM:SS]` in the display time zone, and a last line "
        "saying how to fetch details. The session's own turns are not in it."
    ),
    responses=problem_responses(404, 422),
)
async def get_memory(
    session_id: SessionId, db: SessionDep, tenant: CurrentTenant, settings: SettingsDep
) -> MemoryPublic:
    block = await service.memory_block(
        db, tenant, session_id, window=settings.memory_l2_window_turns, tz=settings.zone
    )
    return MemoryPublic(
        session_id=block.session_id,
        text=block.text,
        counts=MemoryCounts.model_validate(block.counts),
        chain=block.chain,
    )


@router.get(
    "/detail/{time}",
    name="detail",
    summary="L2 and L3 of the turns at a time, across the chain",
    description=(
        "A turn is addressed by the time it ended, as the memory block shows it. A time of "
        "day matches every day it occurs on (newest first); a range matches every turn "
        "inside it. 404 when nothing matches, 422 for a malformed time."
    ),
    responses=problem_responses(404, 422),
)
async def get_detail(
    session_id: SessionId,
    time: TimeRef,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> DetailList:
    turns = await service.detail(db, tenant, session_id, time, tz=settings.zone)
    return DetailList(
        data=[
            TurnDetailPublic(
                session_id=t.session_id,
                turn=t.turn,
                ended_at=t.ended_at,
                time=f"{t.ended_at.astimezone(settings.zone):%H:%M:%S}",
                user_text=t.user_text,
                assistant_text=t.assistant_text,
                l1=t.l1,
                details={
                    kind: [DetailEntryPublic(**vars(e)) for e in entries]
                    for kind, entries in t.details.items()
                },
            )
            for t in turns
        ]
    )


@router.post(
    "/merge",
    name="merge",
    summary="Move this session's turns and chain link into another session",
    description=(
        "Atomic for readers: one small transaction decides the merge (the predecessor link "
        "moves to `into`, and this session answers its memory and detail reads through it "
        "from then on, its turns included); the turns (L1/L2/L3) then move in transactions "
        "of at most `STRATA_MERGE_CHUNK_TURNS`, which no read can tell apart. If the answer "
        "is an error after the merge was decided, asking for the same merge again finishes "
        "the moves (200); merging into another session than the first time is 409."
    ),
    responses=problem_responses(404, 409, 422),
)
async def merge(
    session_id: SessionId,
    body: MergeRequest,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> SessionPublic:
    chunk = max(1, settings.merge_chunk_turns)

    async def decide(db: AsyncSession) -> tuple[SessionPublic, int]:
        target, moved = await service.merge_sessions(db, tenant, session_id, body.into, chunk=chunk)
        # merged-in turns may push older ones out of the window: queue their summaries
        await enqueue_if_needed(db, target, settings.memory_l2_window_turns)
        return SessionPublic.of(target, await status_of(db, target)), moved

    target, moved = await database.write(decide)
    while moved == chunk:
        moved = await database.write(
            lambda db: service.move_merged_turns(db, session_id, target.id, chunk)
        )
    return target
