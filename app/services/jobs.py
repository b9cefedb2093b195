"""Jobs: read, list, start, cancel, and the status changes every job goes through."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.models import Job, JobAction
from app.db.prepared import Peeks
from app.db.repositories.actions import ActionRepository
from app.db.repositories.jobs import JobRepository
from app.db.repositories.jobs import peek_job as peek_job_row
from app.db.repositories.sessions import SessionRepository
from app.db.types import utcnow
from app.domain.actions import CANCELLED_WAITING, ActionStatus, held_call_line
from app.domain.errors import Conflict, NotFound
from app.domain.items import Origin, ToolResult
from app.domain.jobs import TERMINAL, WAITING, JobKind, JobStatus, interrupted_error
from app.services import webhooks
from app.services.event_payloads import action_data, job_status_data
from app.services.events import record_event
from app.services.items import add_item, append_item
from app.services.pagination import Page, page_of

# how deep a chain of subtasks is followed for cancels and waiting questions
_MAX_DEPTH = 16


@dataclass(frozen=True)
class WaitingChild:
    """A subtask (at any depth) waiting for a human, and its question."""

    job_id: str
    movement: str | None
    question: str


async def get_job(db: AsyncSession, tenant: str, job_id: str) -> Job:
    job = await JobRepository(db).get(job_id)
    if job is None or job.tenant != tenant:
        raise NotFound(f"job {job_id!r} does not exist", resource="job")
    return job


async def peek_job(units: Peeks, tenant: str, job_id: str) -> Job:
    """`get_job` outside any unit of work (`Database.peek`): one prepared statement, the
    job detached."""
    job = await peek_job_row(units, job_id)
    if job is None or job.tenant != tenant:
        raise NotFound(f"job {job_id!r} does not exist", resource="job")
    return job


async def get_job_locked(db: AsyncSession, tenant: str, job_id: str) -> Job:
    """`get_job`, its row locked until the transaction ends (`JobRepository.locked`)."""
    job = await JobRepository(db).locked(job_id)
    if job is None or job.tenant != tenant:
        raise NotFound(f"job {job_id!r} does not exist", resource="job")
    return job


async def list_jobs(
    db: AsyncSession,
    tenant: str,
    *,
    limit: int,
    after: str | None,
    session_id: str | None = None,
    status: JobStatus | None = None,
    parent_job_id: str | None = None,
) -> Page[Job]:
    rows = await JobRepository(db).list_page(
        tenant,
        limit=limit + 1,
        before_id=after,
        session_id=session_id,
        status=status,
        parent_job_id=parent_job_id,
    )
    return page_of(rows, limit, lambda row: row.id)


async def enqueue(db: AsyncSession, job: Job, *, start: bool = True) -> Job:
    """Every new job enters here, queued (or, with `start=False`, as a draft that waits
    for `start_job`), so each one is also a `job.status` event."""
    job.status = JobStatus.queued if start else JobStatus.draft
    await JobRepository(db).insert(job)
    if start:
        signals.emit(db, signals.WakeRunner())
    await record_event(db, job.session_id, "job.status", job_status_data(job), job_id=job.id)
    return job


async def start_job(db: AsyncSession, tenant: str, job_id: str) -> Job:
    """Queue a draft. Anything else is a 409: a draft starts once."""
    job = await get_job(db, tenant, job_id)
    if job.status != JobStatus.draft:
        raise Conflict(
            f"job {job_id!r} is {job.status}, not a draft; only a draft can be started",
            job_status=job.status,
        )
    await set_status(db, job, JobStatus.queued)
    return job


async def claim_jobs(db: AsyncSession, owner: str, until: datetime, *, limit: int) -> list[Job]:
    """A runner's claim: up to `limit` jobs leased to `owner` until `until`, each a
    `job.status` event. Prepared statements only, so the claim of a whole batch is one
    statement unit. It is the one status change that bypasses `set_status`, which works
    on one loaded row: of what `set_status` does, `running` needs only the row and its
    event (no signal, no webhook event, nothing for a parent)."""
    jobs = await JobRepository(db).claim(owner, until, limit=limit)
    for job in jobs:
        await record_event(db, job.session_id, "job.status", job_status_data(job), job_id=job.id)
    return jobs


async def set_status(
    db: AsyncSession,
    job: Job,
    status: JobStatus,
    *,
    error: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
) -> None:
    """Every status change goes through here, so each one is also an event."""
    now = utcnow()
    if status in TERMINAL and job.status == JobStatus.waiting_human:
        await close_pending(db, job)  # a turn or movement waiting for people ends
    job.status = status
    job.updated_at = now
    if error is not None:
        job.error = error
    if result is not None:
        job.result = result
    if status == JobStatus.queued or status in TERMINAL:  # runnable again, or session freed
        signals.emit(db, signals.WakeRunner())
    if status in TERMINAL:
        job.finished_at = now
        job.lease_owner = None
        job.lease_expires_at = None
        await give_back_segment(db, job)  # whoever ends it: its runner, a cancel, …
    await JobRepository(db).save_status(job)
    data = job_status_data(job, error=error)
    await record_event(db, job.session_id, "job.status", data, job_id=job.id)
    if status in TERMINAL or status == JobStatus.waiting_human:
        # what a request waiting for the job wakes for: its end, or its wait for people
        signals.emit(db, signals.Notify(job.session_id, job.id, ended=True))
    await webhooks.job_status_changed(db, job, error=error, result=result)
    if status in TERMINAL and job.kind == JobKind.piece:  # no subtask outlives its parent
        await _cancel_descendants(db, job)
    if status in TERMINAL and job.parent_job_id is not None:
        await _wake_parent(db, job.parent_job_id)
    if status == JobStatus.waiting_subtasks:  # its children may all have ended before it waited
        await _requeue_if_children_ended(db, job)
    if status == JobStatus.waiting_human and job.parent_job_id is not None:
        await _tell_ancestors(db, job)


async def give_back_segment(db: AsyncSession, job: Job) -> None:
    """Make a piece job's session current in the segment it had before the job took it.

    A piece job in a chat session works in segments of its own (`app.worker.movement`)
    and keeps the chat's in its state while it holds the session. Whenever it stops
    running its session must get that segment back, or the next chat turn works in the
    job's segment and loses the earlier conversation. Its runner gives it back when it
    asks, waits or ends; `set_status` does it for every job that ends, so a job ended
    outside its runner (one handed back to the queue at a shutdown and then cancelled)
    gives it back too. Once: the state no longer names the segment afterwards."""
    if job.kind != JobKind.piece:
        return
    state: dict[str, Any] = dict(job.state or {})
    segment = state.get("chat_segment")
    if segment is None:
        return
    await SessionRepository(db).set_segment(job.session_id, int(segment))
    state["chat_segment"] = None
    state["open"] = None  # a new start (after ASK, a comment) builds a new prompt
    job.state = state
    await JobRepository(db).save(job)


async def _wake_parent(db: AsyncSession, parent_id: str) -> None:
    """A parent waiting for its subtasks goes back to the queue once all of them ended.

    The parent row is locked (PostgreSQL): a parent entering waiting_subtasks in a
    concurrent transaction is seen here once it committed, so no wake-up is lost."""
    parent = await JobRepository(db).locked(parent_id)
    if parent is None or parent.status != JobStatus.waiting_subtasks:
        return
    await _requeue_if_children_ended(db, parent)


async def _requeue_if_children_ended(db: AsyncSession, parent: Job) -> None:
    children = await JobRepository(db).children(parent.id)
    if all(child.status in TERMINAL for child in children):
        await set_status(db, parent, JobStatus.queued)


async def _tell_ancestors(db: AsyncSession, child: Job) -> None:
    """A subtask asking a human shows on every job above it: an event on each, naming the
    child and its question (the question itself is also in `waiting_on` of each)."""
    repo = JobRepository(db)
    data = {
        "child_job_id": child.id,
        "movement": child.movement,
        "question": (child.result or {}).get("text", ""),
    }
    parent_id, depth = child.parent_job_id, 0
    while parent_id is not None and depth < _MAX_DEPTH:
        parent = await repo.get(parent_id)
        if parent is None:
            return
        await record_event(
            db,
            parent.session_id,
            "job.subtask_waiting",
            {"job_id": parent.id, **data},
            job_id=parent.id,
        )
        parent_id, depth = parent.parent_job_id, depth + 1


async def waiting_children(
    db: AsyncSession, job: Job, *, call_input_chars: int
) -> list[WaitingChild]:
    """The subtasks under `job` (children, their children…) waiting for a human, each with
    its question: what it asked, or, held on tool calls, those calls (`held_call_line`,
    their input cut to `call_input_chars`)."""
    if job.status != JobStatus.waiting_subtasks:
        return []
    repo, actions = JobRepository(db), ActionRepository(db)
    found: list[WaitingChild] = []
    level, depth = [job.id], 0
    while level and depth < _MAX_DEPTH:
        children = await repo.children_of(level)
        for child in children:
            if child.status == JobStatus.waiting_human:
                question = (child.result or {}).get("text", "")
                if not question:
                    held = await actions.of_job(child.id, pending_only=True)
                    lines = [held_call_line(a.tool, a.input, call_input_chars) for a in held]
                    question = "; ".join(lines)
                found.append(WaitingChild(child.id, child.movement, question))
        level = [c.id for c in children if c.status == JobStatus.waiting_subtasks]
        depth += 1
    return found


async def cancel_job(db: AsyncSession, tenant: str, job_id: str) -> Job:
    """A queued, draft or waiting job ends at once; a running one is asked to stop at its
    next step. Its open subtasks are cancelled with it, at every depth."""
    job = await get_job(db, tenant, job_id)
    if job.status in TERMINAL:
        raise Conflict(f"job {job_id!r} has already ended ({job.status})", job_status=job.status)
    await _cancel(db, job)
    if job.status not in TERMINAL:  # ending it swept its subtasks already
        await _cancel_descendants(db, job)
    return job


async def interrupt_job(db: AsyncSession, job: Job) -> None:
    """The user's interrupt of `job` (queued or running): a cancel whose end says so. A
    queued job ends at once as `interrupted`; a running one is stopped now by its runner
    (`signals.CancelJob`), which closes the calls it leaves open as interrupted by the
    user and records the end, with `turn.interrupted`, in one transaction."""
    job.interrupt_requested = True
    if job.status != JobStatus.running:
        await set_status(db, job, JobStatus.cancelled, error=interrupted_error())
        await webhooks.turn_event(db, job, "turn.interrupted")
        return
    await _cancel(db, job)
    await _cancel_descendants(db, job)


async def _cancel(db: AsyncSession, job: Job) -> None:
    if job.status in (JobStatus.queued, JobStatus.draft) or job.status in WAITING:
        await set_status(db, job, JobStatus.cancelled)
        return
    job.cancel_requested = True
    job.updated_at = utcnow()
    await JobRepository(db).save(job)
    signals.emit(db, signals.Notify(job.session_id, job.id))
    signals.emit(db, signals.CancelJob(job.id))


async def _cancel_descendants(db: AsyncSession, job: Job) -> None:
    repo = JobRepository(db)
    level, depth = [job.id], 0
    while level and depth < _MAX_DEPTH:
        children = await repo.children_of(level)
        for child in children:
            if child.status not in TERMINAL and not child.cancel_requested:
                await _cancel(db, child)
        level = [c.id for c in children]
        depth += 1


async def announce_action(db: AsyncSession, type_: str, action: JobAction, tenant: str) -> None:
    """`action.required` / `action.resolved`: the event of the job's streams and its
    webhook, one payload, in the transaction of the change."""
    data = action_data(action)
    await record_event(db, action.session_id, type_, data, job_id=action.job_id)
    await webhooks.enqueue_event(db, tenant, type_, data)


async def close_pending(db: AsyncSession, job: Job) -> None:
    """A job that ends while it waits for people: its pending actions are cancelled and
    their calls get an error result, so the log stays a valid conversation."""
    for action in await ActionRepository(db).of_job(job.id, pending_only=True):
        action.status = ActionStatus.cancelled.value
        action.resolved_at = utcnow()
        await ActionRepository(db).save(action)
        await close_call(db, job, action, CANCELLED_WAITING)
        await announce_action(db, "action.resolved", action, job.tenant)


async def close_call(db: AsyncSession, job: Job, action: JobAction, content: str) -> None:
    """The error result of an action's call that will never run: in the segment of the
    call, which for a piece job's movement is its own, not the session's current one
    (the chat's, given back while the job waits)."""
    result = ToolResult(
        tool_use_id=action.tool_use_id, content=content, is_error=True, name=action.tool
    )
    opened = (job.state or {}).get("open") if job.kind == JobKind.piece else None
    if not isinstance(opened, dict):
        await append_item(db, job.session_id, result, Origin.system, turn=job.turn, job_id=job.id)
        return
    slot = await SessionRepository(db).allocate_seq(job.session_id, new_turn=False)
    slot = replace(slot, segment=int(opened["segment"]))
    await add_item(db, job.session_id, slot, result, Origin.system, turn=job.turn, job_id=job.id)
