"""The database's side of `GET /metrics`: two aggregate reads per scrape, none per request."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.domain.jobs import JobStatus


class MetricsRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def jobs_by_kind_and_status(self) -> dict[tuple[str, str], int]:
        # `kind` names the handler that runs a job (app.domain.jobs.JobKind)
        query = select(Job.kind, Job.status, func.count()).group_by(col(Job.kind), col(Job.status))
        return {(kind, status): count for kind, status, count in await self.db.exec(query)}

    async def queue(self) -> tuple[int, datetime | None]:
        """How many jobs are queued, and when the oldest of them was created."""
        query = select(func.count(), func.min(Job.created_at)).where(Job.status == JobStatus.queued)
        count, oldest = (await self.db.exec(query)).one()
        return int(count), oldest
