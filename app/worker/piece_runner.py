"""Running a piece: movement after movement, until COMPLETE, ASK, ABORT or WAIT_SUBTASKS.

Between movements only the lessons, the feedback sent back, the checklists and the
task list travel (not the conversation): each movement starts from its own prompt. The
job row keeps the movement and the state, so a runner that dies is replaced by one that
continues the open movement from the log, and a job that asked a human resumes at the
movement that asked.

Only the model completes a job: a transition it called into COMPLETE succeeds; a forced
one (the context ran out, or the model never called transition) fails the job as
`not-completed`, naming the movement. A job that runs more movements than its piece's
`max_movements` (default STRATA_JOB_MAX_MOVEMENTS) is aborted, and so is one that would
begin a movement past its tree's budget: a subtask's movements, at every depth, count
against its root's `max_movements` (on the root's row, `jobs.tree_movements`).

Whenever the job stops running, however it stops, its session gets the segment it had
before the job back, so the next chat turn sees the conversation it saw before.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.jobs import ASK, COMPLETE, WAIT_SUBTASKS, JobStatus, status_after
from app.engine.pieces import Movement, Piece
from app.engine.workspace import Workspace
from app.mcp.pool import McpPool
from app.services import jobs, webhooks
from app.services.comments import Author, post_comment
from app.services.piece_jobs import workspace_of
from app.services.tasks import load_store
from app.tools.sandbox import Confinement
from app.worker.handlers import Also, Deps, Outcome, job_database, problem
from app.worker.movement import Transition, TreeBudget, run_movement
from app.worker.piece_state import PieceState
from app.worker.workspace_notes import git_excerpt, write_task_checklist

logger = logging.getLogger("strata.pieces")


async def run_piece(deps: Deps, job: Job) -> Outcome:
    piece = deps.pieces.get(job.piece or "")
    if piece is None:
        detail = f"piece {job.piece!r} is not known to this server"
        return _ended(
            job, Outcome(JobStatus.failed, error=problem("unknown-piece", "Unknown piece", detail))
        )
    state = PieceState.load(job.state)
    try:
        movement = piece.movement(job.movement) if job.movement else piece.first
    except KeyError:
        detail = f"piece {piece.name!r} has no movement {job.movement!r} any more"
        return _ended(
            job,
            Outcome(
                JobStatus.failed, error=problem("unknown-movement", "Unknown movement", detail)
            ),
        )
    workspace = workspace_of(deps.settings, job.id)
    workspace.ensure_layout()
    limit = piece.max_movements or deps.settings.job_max_movements
    tree = await _tree_budget(deps, job, limit)
    # the job's MCP connections: a stdio server runs in the job's folder, once per job
    pool = McpPool(Confinement.of(deps.settings), root=workspace.root)
    try:
        return await _run_movements(deps, job, piece, movement, state, workspace, tree, limit, pool)
    finally:
        await pool.close()


async def _run_movements(
    deps: Deps,
    job: Job,
    piece: Piece,
    movement: Movement,
    state: PieceState,
    workspace: Workspace,
    tree: TreeBudget,
    limit: int,
    pool: McpPool,
) -> Outcome:
    """Movement after movement until the job ends (at most `limit` begun by it)."""
    while True:
        resuming = state.open is not None and state.open.movement == movement.name
        if not resuming and state.movements_run >= limit:
            return _ended(job, _too_many_movements(piece, state, limit))
        step = await run_movement(deps, job, piece, movement, state, workspace, tree, pool)
        if step is None:
            return _ended(job, Outcome(JobStatus.cancelled))
        if isinstance(step, Outcome):
            # a movement waiting for people on tool calls stays open (`run_movement`)
            return step if step.status == JobStatus.waiting_human else _ended(job, step)
        await _transitioned(deps, job, movement, step)
        await _movement_ended(deps, job, piece, movement, step, state, workspace)
        if step.forced and step.next_step == COMPLETE:
            await _save(deps, job, movement.name, state)
            return _ended(job, _not_completed(movement, step))
        status = status_after(step.next_step)
        if status is not None:
            await _save(deps, job, None if status == JobStatus.succeeded else movement.name, state)
            also = _ask(job, step) if step.next_step == ASK else None
            return _ended(job, Outcome(status, result={"text": step.summary}, also=also))
        if piece.sends_back(movement, step.next_step):
            state.send_back(
                step.next_step, movement.name, step.summary, deps.settings.feedback_max_chars
            )
        state.visited.append(movement.name)
        movement = piece.movement(step.next_step)


async def _tree_budget(deps: Deps, job: Job, limit: int) -> TreeBudget:
    """The budget of the job's tree: a root's own `limit`; for a subtask, its root's
    (the root's piece's `max_movements`, else STRATA_JOB_MAX_MOVEMENTS)."""
    if job.root_job_id is None:
        return TreeBudget(job.id, limit)
    async with deps.database.read() as db:
        root = await JobRepository(db).get(job.root_job_id)
    root_piece = deps.pieces.get(root.piece or "") if root is not None else None
    most = root_piece.max_movements if root_piece is not None else None
    return TreeBudget(job.root_job_id, most or deps.settings.job_max_movements)


def _not_completed(movement: Movement, step: Transition) -> Outcome:
    detail = (
        f"step {movement.name!r} never finished: it did not call transition itself and was "
        f"forced towards COMPLETE ({step.summary}); only a transition the model calls "
        "completes a job"
    )
    error = problem("not-completed", "The job was not completed", detail)
    return Outcome(JobStatus.failed, error=error, result={"text": step.summary})


def _too_many_movements(piece: Piece, state: PieceState, limit: int) -> Outcome:
    recent = " → ".join(state.visited[-6:])
    detail = (
        f"the job ran {state.movements_run} movements, the most piece {piece.name!r} allows "
        f"(max_movements {limit}); the last ones: {recent}"
    )
    error = problem("max-movements", "Too many movements", detail)
    return Outcome(JobStatus.aborted, error=error, result={"text": detail})


async def _transitioned(deps: Deps, job: Job, movement: Movement, step: Transition) -> None:
    """The `movement.ended` event of a transition, model-called or forced (a job that
    stops inside a movement, failed or cancelled, says so by its `job.status`)."""

    async def record(db: AsyncSession) -> None:
        await webhooks.movement_event(
            db, job, "movement.ended", movement.name, next_step=step.next_step, forced=step.forced
        )

    await job_database(deps, job).write(record)


async def _movement_ended(
    deps: Deps,
    job: Job,
    piece: Piece,
    movement: Movement,
    step: Transition,
    state: PieceState,
    workspace: Workspace,
) -> None:
    """What every transition leaves behind: its lessons, the feedback it consumed, the
    task checklist, after a verify movement the git excerpt, and after a forced one the
    note telling the next movement so.

    A movement that pauses (ASK, WAIT_SUBTASKS) runs again when the answer or the
    subtasks come back, so the feedback it was shown is not spent yet."""
    state.open = None
    if step.next_step not in (ASK, WAIT_SUBTASKS):
        state.delivered(movement.name)
    _record_lessons(job, movement, step, state, workspace)
    state.forced = forced_note(movement, step) if step.forced else None
    async with deps.database.read() as db:
        tasks = await load_store(db, job.session_id)
    write_task_checklist(workspace, tasks)
    state.git_excerpt = None
    if movement.verify:
        state.git_excerpt = await git_excerpt(workspace, deps.settings)


def _ask(job: Job, step: Transition) -> Also:
    async def also(db: AsyncSession) -> None:
        await post_comment(db, job, step.summary, Author.agent)

    return also


def forced_note(movement: Movement, step: Transition) -> str:
    """What the movement a forced transition leads to is told: it starts from a step that
    never finished, not from a plan or work handed on."""
    return (
        f"Step {movement.name!r} did not call transition itself and was forced on to "
        f"{step.next_step!r} ({step.summary}). It left no summary or lessons: check what it "
        "did (the task list, the files) before relying on it."
    )


def _record_lessons(
    job: Job, movement: Movement, step: Transition, state: PieceState, workspace: Workspace
) -> None:
    """COMPLETE without lessons hands on its summary, a forced transition how it was
    forced; lessons also go to logs/lessons.jsonl."""
    text = step.lessons or (step.summary if step.next_step == COMPLETE or step.forced else None)
    if not text:
        return
    state.lessons.append({"movement": movement.name, "text": text})
    entry = {
        "at": utcnow().isoformat(),
        "job_id": job.id,
        "movement": movement.name,
        "next_step": step.next_step,
        "forced": step.forced,
        "lessons": text,
    }
    with (workspace.root / "logs" / "lessons.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry, ensure_ascii=False) + "\n")


async def _save(deps: Deps, job: Job, movement: str | None, state: PieceState) -> None:
    async def save(db: AsyncSession) -> None:
        current = await JobRepository(db).get(job.id)
        if current is None:
            return
        current.movement = movement
        current.state = state.dump()
        current.updated_at = utcnow()
        await JobRepository(db).save(current)

    await job_database(deps, job).write(save)
    job.movement = movement
    job.state = state.dump()


def _ended(job: Job, outcome: Outcome) -> Outcome:
    """The outcome, with the chat's segment given back in the transaction that ends it."""
    give_back = give_back_segment(job)
    then = outcome.also

    async def also(db: AsyncSession) -> None:
        await give_back(db)
        if then is not None:
            await then(db)

    return replace(outcome, also=also)


def give_back_segment(job: Job) -> Also:
    """The session's segment given back (`app.services.jobs.give_back_segment`) in the
    transaction that stops the job, and the runner's copy of the state made to match."""

    async def give_back(db: AsyncSession) -> None:
        current = await JobRepository(db).get(job.id)
        if current is None:
            return
        await jobs.give_back_segment(db, current)
        job.state = current.state

    return give_back


def piece_ended_otherwise(deps: Deps, job: Job) -> Also | None:
    """A piece job that crashed, failed on the LLM or was cancelled gives its session's
    segment back too."""
    return give_back_segment(job)
