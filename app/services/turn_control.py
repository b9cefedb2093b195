"""A person's hand on a running turn: interrupt it, or steer it with a message it takes at
its next step.

An interrupt is a cancel the user asked for the session's turn (`interrupt_job`). A steer
is a chat message queued with `steer` set: the session's running turn takes it at its next
step boundary, after the step's tool results and before its next request
(`DbTurnStore.segment`), ending the steer's job and appending its user item in one fenced
transaction; a turn that ends before that leaves it queued, and it runs as the next turn
like any message.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import Conflict
from app.domain.items import ItemPayload, Origin
from app.domain.jobs import JobStatus
from app.services import webhooks
from app.services.chat import user_item_of
from app.services.items import append_item
from app.services.jobs import interrupt_job, set_status
from app.services.sessions import no_session


async def interrupt_session(db: AsyncSession, tenant: str, session_id: str) -> Job:
    """Interrupt the session's turn: its first queued or running job, or its chat turn
    waiting for people (its held calls are answered as cancelled). A session with none is
    a 409 (`session-idle`): there is nothing to stop, and a client racing the turn's end
    learns that it ended first."""
    if await SessionRepository(db).tenant_of(session_id, lock=True) != tenant:
        raise no_session(session_id)
    job = await JobRepository(db).lane_head(session_id)
    if job is None:
        raise Conflict("the session has no turn to interrupt", reason="session-idle")
    await interrupt_job(db, job)
    return job


async def take_steers(db: AsyncSession, job: Job) -> list[tuple[int, ItemPayload]]:
    """Take the steers waiting for `job`'s turn, in the order they were sent: each one's
    user item is appended to the turn, its job ends `succeeded` naming the turn that took
    it (`result.steered_into`), and `turn.steered` is recorded. The caller's transaction
    is fenced by `job`'s lease; the steers' rows are locked and must still be queued, so
    a steer is taken once, or cancelled, or run as a turn of its own, never two of these."""
    taken: list[tuple[int, ItemPayload]] = []
    for steer in await JobRepository(db).steers_to_take(job.session_id):
        payload = user_item_of(steer)  # its text, or its parts when it attaches files
        row = await append_item(
            db, job.session_id, payload, Origin.user, turn=job.turn, job_id=job.id
        )
        result = {"steered_into": job.id, "turn": job.turn, "item_seq": row.seq}
        await set_status(db, steer, JobStatus.succeeded, result=result)
        await webhooks.turn_event(db, job, "turn.steered", steer_job_id=steer.id, seq=row.seq)
        taken.append((row.seq, payload))
    return taken
