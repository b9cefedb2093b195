"""Deleting a session: its jobs stop, and its log, tasks (they live in the log), memory,
events, comments and workspace files go, with its subagents' sessions. Sessions that
continued from it or were merged into it stay, unlinked. A session with forks, which
read its log, is a 409 until they are deleted."""

from __future__ import annotations

import shutil

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches, signals
from app.db.repositories.session_deletion import SessionDeletionRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import Conflict
from app.domain.jobs import TERMINAL
from app.services.piece_jobs import workspace_of
from app.services.sessions import get_session
from app.services.workspace_snapshots import remove_snapshots
from app.settings import Settings


async def delete_session(db: AsyncSession, tenant: str, session_id: str) -> list[str]:
    """Deletes the rows in the caller's transaction; returns the ids of the jobs whose
    workspaces are to be removed once it committed (`remove_workspaces`)."""
    await get_session(db, tenant, session_id)  # 404 for an unknown or another tenant's
    repo = SessionDeletionRepository(db)
    doomed = [session_id]
    frontier = [session_id]
    while frontier:
        frontier = [s for s in await repo.subagents(frontier) if s not in doomed]
        doomed.extend(frontier)
    if forks := [f for f in await SessionRepository(db).forks_of(doomed) if f not in doomed]:
        raise Conflict(
            f"sessions {forks} are forks that read this session's log: delete them first",
            reason="session-has-forks",
            forks=forks,
        )
    jobs = await repo.jobs(doomed)
    for job in jobs:
        if job.status not in TERMINAL:  # a runner of this process stops it at once
            signals.emit(db, signals.CancelJob(job.id))
        signals.emit(db, signals.Notify(job.session_id, job.id, ended=True))
    await repo.unlink(doomed)
    await repo.delete(doomed)
    for gone in doomed:  # what this process read of their logs
        caches.forget(db, caches.SESSION_VIEWS, gone)
    return [job.id for job in jobs]


def remove_workspaces(settings: Settings, tenant: str, job_ids: list[str]) -> None:
    """Blocking (run it in a thread): the files of the deleted jobs and their snapshots."""
    for job_id in job_ids:
        shutil.rmtree(workspace_of(settings, job_id).root, ignore_errors=True)
    remove_snapshots(settings, tenant, job_ids)
