"""The SQL of deleting a session: its rows go by foreign-key cascade (items, events, jobs
and their comments, memory turns and their details); the sessions that point at it are
unlinked or, for its subagents, deleted with it."""

from __future__ import annotations

from sqlalchemy import delete, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job, Session


class SessionDeletionRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def subagents(self, session_ids: list[str]) -> list[str]:
        query = select(Session.id).where(col(Session.parent_session_id).in_(session_ids))
        return list((await self.db.exec(query)).all())

    async def jobs(self, session_ids: list[str]) -> list[Job]:
        query = select(Job).where(col(Job.session_id).in_(session_ids))
        return list((await self.db.exec(query)).all())

    async def unlink(self, session_ids: list[str]) -> None:
        """Chains keep the sessions that continued from, or were merged into, these."""
        for column in (Session.continues_from, Session.merged_into):
            await self.db.exec(
                update(Session).where(col(column).in_(session_ids)).values({column: None})
            )

    async def delete(self, session_ids: list[str]) -> None:
        await self.db.exec(delete(Session).where(col(Session.id).in_(session_ids)))
