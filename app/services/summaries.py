"""L1 summaries' backlog: which turns wait for an L1 line, and the job that writes them.

A chain keeps its newest turns as L2; every older turn needs an L1 line. The
summary model writes them in a `summary` job in the background lane
(`app.worker.summaries`), so it never delays a reply; here are only the reads
and the enqueue, which the API, the Claude Code ingest and the turn end share.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job, MemoryTurn, Session
from app.db.repositories.jobs import JobRepository
from app.db.repositories.memory import MemoryRepository
from app.domain.ids import new_id
from app.domain.jobs import JobKind
from app.services.jobs import enqueue
from app.services.memory import has_predecessors, owners_of


async def pending_turns(db: AsyncSession, session: Session, window: int) -> list[MemoryTurn]:
    """Turns of the chain (this session included) older than the newest `window`, without
    L1, oldest first."""
    return await MemoryRepository(db).without_l1(await owners_of(db, session), window)


async def pending_count(db: AsyncSession, session: Session, window: int) -> int:
    """How many turns `pending_turns` would load, counted without loading any; for a
    session that continues none and that none was merged into (most), by one statement."""
    repo = MemoryRepository(db)
    if window > 0 and not has_predecessors(session):
        alone = await repo.alone_without_l1(session.id, window)
        if alone is not None:
            return alone
    return await repo.count_without_l1(await owners_of(db, session), window)


async def enqueue_if_needed(db: AsyncSession, session: Session, window: int) -> Job | None:
    """At every turn end: a `summary` job when the chain has turns waiting for L1 and
    none is queued or running yet. The count comes first: a chain shorter than the
    window (most) has nothing waiting, and then that is the one statement."""
    if not await pending_count(db, session, window):
        return None
    if await JobRepository(db).active_of_kind(session.id, JobKind.summary) is not None:
        return None
    return await enqueue(
        db,
        Job(
            id=new_id("job"),
            tenant=session.tenant,
            session_id=session.id,
            kind=JobKind.summary,
            lane="background",
        ),
    )
