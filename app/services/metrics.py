"""`GET /metrics`: the database's numbers, read at scrape time, and the counters."""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.repositories.metrics import MetricsRepository
from app.db.types import utcnow
from app.observability.metrics import JobCounts, exposition


async def scrape(db: AsyncSession) -> tuple[bytes, str]:
    repo = MetricsRepository(db)
    queued, oldest = await repo.queue()
    counts = JobCounts(
        by_kind_and_status=await repo.jobs_by_kind_and_status(),
        queued=queued,
        oldest_queued_age_seconds=(
            max(0.0, (utcnow() - oldest).total_seconds()) if oldest is not None else 0.0
        ),
    )
    return exposition(counts)
