"""Pending actions (`JobAction`): written with a job's wait, resolved by a person or by
their expiry, marked started by the run that runs the call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import col, select, update

from app.db.models import JobAction
from app.db.repositories.rows import RowRepository
from app.domain.actions import ActionStatus


class ActionRepository(RowRepository):
    async def get(self, action_id: str, *, locked: bool = False) -> JobAction | None:
        return await self.by_id(JobAction, action_id, locked=locked)

    async def of_job(self, job_id: str, *, pending_only: bool = False) -> list[JobAction]:
        """The job's actions, oldest first (only those still pending: `pending_only`)."""
        query = select(JobAction).where(JobAction.job_id == job_id)
        if pending_only:
            query = query.where(JobAction.status == ActionStatus.pending.value)
        query = query.order_by(col(JobAction.created_at), col(JobAction.id))
        return list((await self.db.exec(query)).all())

    async def list_page(
        self, tenant: str, *, limit: int, before_id: str | None, status: str | None
    ) -> list[JobAction]:
        """The tenant's actions across its jobs, newest first (ids are time-ordered)."""
        query = select(JobAction).where(JobAction.tenant == tenant)
        if status is not None:
            query = query.where(JobAction.status == status)
        if before_id is not None:
            query = query.where(col(JobAction.id) < before_id)
        query = query.order_by(col(JobAction.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def of_calls(self, job_id: str, tool_use_ids: Sequence[str]) -> list[JobAction]:
        """The job's actions on these calls (a turn resuming with calls left unanswered)."""
        query = select(JobAction).where(
            JobAction.job_id == job_id, col(JobAction.tool_use_id).in_(list(tool_use_ids))
        )
        return list((await self.db.exec(query)).all())

    async def mark_started(self, action_ids: Sequence[str], at: datetime) -> None:
        """Their calls begin to run: a later run of the job never runs them again."""
        if not action_ids:
            return
        statement = (
            update(JobAction)
            .where(col(JobAction.id).in_(list(action_ids)))
            .values(started_at=at)
            .execution_options(synchronize_session=False)
        )
        await self.db.exec(statement)

    async def due(self, now: datetime, limit: int, *, lock: bool = True) -> list[JobAction]:
        """Pending actions whose `expires_at` has passed, oldest first; `lock`ed
        (PostgreSQL: `SKIP LOCKED`, so two sweeps never take one)."""
        query = (
            select(JobAction)
            .where(
                JobAction.status == ActionStatus.pending.value,
                col(JobAction.expires_at) <= now,
            )
            .order_by(col(JobAction.expires_at))
            .limit(limit)
        )
        if lock:
            query = query.with_for_update(skip_locked=True)
        return list((await self.db.exec(query)).all())
