from __future__ import annotations

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Event


class EventRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def add(self, row: Event) -> Event:
        self.db.add(row)
        await self.db.flush()
        return row

    async def after(
        self, *, session_id: str | None, job_id: str | None, after_id: int, limit: int
    ) -> list[Event]:
        query = select(Event).where(col(Event.id) > after_id)
        if session_id is not None:
            query = query.where(Event.session_id == session_id)
        if job_id is not None:
            query = query.where(Event.job_id == job_id)
        return list((await self.db.exec(query.order_by(col(Event.id)).limit(limit))).all())

    async def last_id(self) -> int:
        result = await self.db.exec(select(Event.id).order_by(col(Event.id).desc()).limit(1))
        return result.first() or 0
