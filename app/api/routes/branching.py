from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import CurrentTenant, DatabaseDep, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.branching import (
    ForkCreate,
    RewindCreate,
    RewindPreviewPublic,
    RewindPublic,
    WorkspaceChangesPublic,
)
from app.api.schemas.sessions import SessionPublic, SessionStatus
from app.services import branching as service
from app.services.branching import WorkspaceChanges

router = APIRouter(
    prefix="/sessions/{session_id}", tags=["sessions"], responses=problem_responses(401, 503)
)


@router.post(
    "/fork",
    status_code=201,
    name="fork",
    summary="Fork a session at a point of its log",
    description=(
        "A new session that reads this one's log up to the point and appends its own after "
        "it (nothing is copied): its task list is the replay up to there, REST edits "
        "included. 422 `inside-tool-call` for a point between a `tool_use` and its results "
        "(`nearest` names the points around it); 409 `session-busy` at the head of a "
        "session whose turn is queued or running."
    ),
    responses=problem_responses(404, 409, 413, 422),
)
async def fork_session(
    session_id: SessionId, body: ForkCreate, database: DatabaseDep, tenant: CurrentTenant
) -> SessionPublic:
    async def work(db: AsyncSession) -> SessionPublic:
        row = await service.fork_session(
            db,
            tenant,
            session_id,
            at_seq=body.at_seq,
            at_turn=body.at_turn,
            before_turn=body.before_turn,
            title=body.title,
        )
        return SessionPublic.of(row, SessionStatus.idle)

    return await database.write(work)


@router.post(
    "/rewind",
    name="rewind",
    summary="Go back to an earlier point of the log, keeping every item",
    description=(
        "Appends a `rewind` item and continues from the log as it was at the point: the "
        "model no longer sees the turns after it, task replay skips them, and they stay in "
        "`/items` marked `reverted`. A rewind to the answer's `from_seq` undoes it. 409 "
        "`session-busy` while a turn is queued or running; 422 `inside-tool-call` as for a "
        "fork. `files: true` also restores the session's job workspace to its snapshot at "
        "the point (one is taken at each movement start and chat turn start), after a "
        "safety snapshot of it as it is; 422 `no-workspace`, `no-snapshot` or "
        "`snapshot-not-kept` when it cannot."
    ),
    responses=problem_responses(404, 409, 413, 422),
)
async def rewind_session(
    session_id: SessionId,
    body: RewindCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> RewindPublic:
    async def work(db: AsyncSession) -> service.Rewound:
        return await service.rewind_session(
            db, tenant, session_id, to_seq=body.to_seq, to_turn=body.to_turn
        )

    if body.files:
        done = await service.rewind_with_files(
            database, settings, tenant, session_id, to_seq=body.to_seq, to_turn=body.to_turn
        )
    else:
        done = await database.write(work)
    return RewindPublic(
        seq=done.seq,
        to_seq=done.to_seq,
        from_seq=done.from_seq,
        segment=done.segment,
        workspace=_workspace(done.workspace),
    )


@router.get(
    "/rewind-preview",
    name="rewind_preview",
    summary="What a rewind would change, changing nothing",
    description="Give `to_turn` or `to_seq` as `POST /sessions/{session_id}/rewind` would "
    "take them: the answer lists the turns the model would stop seeing (or see again, for "
    "an undo), the task list now and after, and the files of those turns; with "
    "`files=true`, the workspace paths the restore would add, change and delete. Nothing "
    "is written; a point inside a tool call is a 422 naming the nearest valid points.",
    responses=problem_responses(404, 422),
)
async def rewind_preview(
    session_id: SessionId,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    to_turn: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    to_seq: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    files: Annotated[bool, Query(description="Also what `files: true` would restore.")] = False,
) -> RewindPreviewPublic:
    preview = await service.rewind_preview(
        db,
        tenant,
        session_id,
        to_seq=to_seq,
        to_turn=to_turn,
        files=settings if files else None,
    )
    return RewindPreviewPublic(
        to_seq=preview.to_seq,
        from_seq=preview.from_seq,
        reverted_turns=preview.reverted_turns,
        restored_turns=preview.restored_turns,
        tasks_before=preview.tasks_before,
        tasks_after=preview.tasks_after,
        files=preview.files,
        workspace=_workspace(preview.workspace),
    )


def _workspace(done: WorkspaceChanges | None) -> WorkspaceChangesPublic | None:
    if done is None:
        return None
    return WorkspaceChangesPublic(
        job_id=done.job_id,
        snapshot_seq=done.snapshot_seq,
        added=done.changes.added,
        changed=done.changes.changed,
        deleted=done.changes.deleted,
    )
