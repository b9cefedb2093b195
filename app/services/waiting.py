"""Waiting for a job to end, woken by the live hub and bounded by a timeout."""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.db.models import Job
from app.domain.jobs import TERMINAL, JobStatus
from app.services.jobs import peek_job
from app.services.live import LiveHub


async def wait_for_job(
    database: Database, hub: LiveHub, tenant: str, job_id: str, *, within: float
) -> Job:
    """The job once it ended or waits for a person (its pending actions), or as it is
    when `within` seconds ran out.

    The job is read once at the start and once per wake-up, with one prepared statement
    outside any unit of work: at the commit that ended it (or removed it), or at the
    clock's tick (`app.services.live.run_clock`: a job that another process ended
    without a bridge). Other jobs' and sessions' signals, its own
    steps and text deltas never reach it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    with hub.subscribe(job_id=job_id, live=False, ends_only=True, ticks=True) as signals:
        while True:
            job = await peek_job(database, tenant, job_id)
            remaining = deadline - loop.time()
            if job.status in TERMINAL or job.status == JobStatus.waiting_human or remaining <= 0:
                return job
            await signals.next(remaining)  # its end, a tick, or the deadline: read again
            signals.take_missed()
