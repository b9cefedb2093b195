"""Submitting jobs that run a piece, and where their workspaces live."""

from __future__ import annotations

from pathlib import Path

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.rows import RowRepository
from app.domain.ids import new_id
from app.domain.jobs import JobKind
from app.engine.pieces import Piece
from app.engine.workspace import Workspace
from app.services.jobs import enqueue
from app.services.sessions import create_session, get_session
from app.settings import Settings


def workspace_of(settings: Settings, job_id: str) -> Workspace:
    return Workspace(Path(settings.data_dir) / "workspaces" / job_id)


async def submit_job(
    db: AsyncSession,
    tenant: str,
    *,
    instruction: str,
    piece: Piece,
    session_id: str | None = None,
    parent: Job | None = None,
    start: bool = True,
) -> Job:
    """Queue a piece job (or, with `start=False`, make it a draft that takes files and
    comments until it is started); without a session one is made for it (a subtask gets
    its own). In a chat session it works in segments of its own (`app.worker.movement`)."""
    if session_id is not None:
        session = await get_session(db, tenant, session_id)
    else:
        session = await create_session(db, tenant, title=_title(instruction))
        if parent is not None:
            session.parent_session_id = parent.session_id
            await RowRepository(db).save(session)
    return await enqueue(
        db,
        Job(
            id=new_id("job"),
            tenant=tenant,
            session_id=session.id,
            kind=JobKind.piece,
            piece=piece.name,
            instruction=instruction,
            parent_job_id=parent.id if parent is not None else None,
        ),
        start=start,
    )


def _title(instruction: str) -> str:
    first = instruction.strip().splitlines()[0] if instruction.strip() else "job"
    return first[:80]
