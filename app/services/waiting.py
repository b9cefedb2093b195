"""Waiting for a job to end, woken by the live hub and bounded by a timeout."""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.db.models import Job
from app.domain.jobs import TERMINAL
from app.services.jobs import get_job
from app.services.live import LiveHub


async def wait_for_job(
    database: Database, hub: LiveHub, tenant: str, job_id: str, *, within: float, poll: float
) -> Job:
    """The job once it ended, or as it is when `within` seconds ran out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    with hub.subscribe() as signals:
        while True:
            async with database.read() as db:
                job = await get_job(db, tenant, job_id)
            remaining = deadline - loop.time()
            if job.status in TERMINAL or remaining <= 0:
                return job
            try:
                await asyncio.wait_for(signals.get(), timeout=min(poll, remaining))
            except TimeoutError:
                pass
