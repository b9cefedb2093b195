"""Submitting jobs that run a piece, and where their workspaces live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job, Session
from app.db.repositories.jobs import JobRepository
from app.db.repositories.rows import RowRepository
from app.domain.errors import SubtaskLimit
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
    client_tools: list[dict[str, Any]] | None = None,
    mcp: list[dict[str, Any]] | None = None,
    job_id: str | None = None,
) -> Job:
    """Queue a piece job (or, with `start=False`, make it a draft that takes files and
    comments until it is started); `client_tools` (as checked) are offered in each of its
    movements. Without a session one is made for it (a subtask gets its own, under its
    parent's session's tool policy). In a chat session it works in segments of its own
    (`app.worker.movement`). `mcp`: the MCP servers it attaches (checked), kept in its
    `input`; a subtask has its parent's. `job_id`: the id it gets, when the caller chose
    it (to fill its folder first)."""
    if parent is not None and mcp is None:
        mcp = (parent.input or {}).get("mcp")
    if session_id is not None:
        session = await get_session(db, tenant, session_id)
    else:
        session = await create_session(db, tenant, title=_title(instruction))
        if parent is not None:
            session.parent_session_id = parent.session_id
            # its parent's session's tool policy binds the subtask's movements too
            above = await RowRepository(db).by_id(Session, parent.session_id)
            session.tool_policy = above.tool_policy if above is not None else None
            await RowRepository(db).save(session)
    return await enqueue(
        db,
        Job(
            id=job_id or new_id("job"),
            tenant=tenant,
            session_id=session.id,
            kind=JobKind.piece,
            piece=piece.name,
            instruction=instruction,
            parent_job_id=parent.id if parent is not None else None,
            root_job_id=(parent.root_job_id or parent.id) if parent is not None else None,
            depth=parent.depth + 1 if parent is not None else 0,
            input=(
                ({"client_tools": client_tools} if client_tools else {})
                | ({"mcp": mcp} if mcp else {})
            ),
        ),
        start=start,
    )


async def submit_subtask(
    db: AsyncSession, settings: Settings, parent: Job, *, instruction: str, piece: Piece
) -> Job:
    """Queue a subtask of `parent` (its row locked by the caller, so two of its subtasks
    are counted one after the other), or refuse it (`SubtaskLimit`, 409) when `parent`
    started STRATA_JOB_MAX_SUBTASKS already, or is STRATA_JOB_MAX_SUBTASK_DEPTH levels
    below its tree's root: a tree of subtasks stays bounded however its agents spawn."""
    deepest = settings.job_max_subtask_depth
    if parent.depth >= deepest:
        raise SubtaskLimit(
            f"job {parent.id} is {parent.depth} level(s) below its tree's root, and subtasks "
            f"may go {deepest} level(s) deep (STRATA_JOB_MAX_SUBTASK_DEPTH); do this work in "
            "this job instead",
            job_id=parent.id,
        )
    most = settings.job_max_subtasks
    started = await JobRepository(db).count_children(parent.id)
    if started >= most:
        raise SubtaskLimit(
            f"job {parent.id} has started {started} subtasks, the most one job may "
            f"(STRATA_JOB_MAX_SUBTASKS={most}); wait for them (WAIT_SUBTASKS) or do the rest "
            "in this job",
            job_id=parent.id,
        )
    return await submit_job(db, parent.tenant, instruction=instruction, piece=piece, parent=parent)


def _title(instruction: str) -> str:
    first = instruction.strip().splitlines()[0] if instruction.strip() else "job"
    return first[:80]
