from __future__ import annotations

from typing import Any

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import deferred
from app.db.models import Event
from app.db.types import utcnow

_EVENTS = Event.__table__  # type: ignore[attr-defined]


class EventRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def insert(
        self, session_id: str, job_id: str | None, type_: str, data: dict[str, Any]
    ) -> None:
        """Deferred to the unit's end (`app.db.deferred`): a unit's events go in one
        statement. No ORM object is made (events are written on every step)."""
        values = {
            "session_id": session_id,
            "job_id": job_id,
            "type": type_,
            "data": data,
            "created_at": utcnow(),
        }
        deferred.defer(self.db, _EVENTS, values)

    async def after(
        self, *, session_id: str | None, job_id: str | None, after_id: int, limit: int
    ) -> list[Event]:
        await deferred.flush(self.db)
        query = select(Event).where(col(Event.id) > after_id)
        if session_id is not None:
            query = query.where(Event.session_id == session_id)
        if job_id is not None:
            query = query.where(Event.job_id == job_id)
        return list((await self.db.exec(query.order_by(col(Event.id)).limit(limit))).all())

    async def newest_of_type(self, session_id: str, type_: str) -> Event | None:
        """The session's newest event of `type_`."""
        await deferred.flush(self.db)
        query = (
            select(Event)
            .where(Event.session_id == session_id, Event.type == type_)
            .order_by(col(Event.id).desc())
            .limit(1)
        )
        return (await self.db.exec(query)).first()

    async def last_id(self) -> int:
        await deferred.flush(self.db)
        result = await self.db.exec(select(Event.id).order_by(col(Event.id).desc()).limit(1))
        return result.first() or 0
