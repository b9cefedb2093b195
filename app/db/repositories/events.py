from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import Integer, Text, bindparam, cast
from sqlalchemy import select as core_select
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import deferred
from app.db.models import Event
from app.db.prepared import Prepared
from app.db.repositories.items import parse_stored_json
from app.db.types import utcnow

_EVENTS = Event.__table__  # type: ignore[attr-defined]


class EventRow(NamedTuple):
    """An event as a stream sends it: plain values, its data parsed with orjson."""

    id: int
    session_id: str
    job_id: str | None
    type: str
    data: dict[str, Any]


def _rows_after(*, of_job: bool) -> Prepared:
    """A session's events after an id, in order, up to a limit; of one job of it too."""
    events = _EVENTS.c
    query = core_select(
        events.id, events.session_id, events.job_id, events.type, cast(events.data, Text)
    ).where(events.session_id == bindparam("e_session"), events.id > bindparam("e_after"))
    if of_job:
        query = query.where(events.job_id == bindparam("e_job"))
    return Prepared(query.order_by(events.id).limit(bindparam("e_limit", type_=Integer)))


_OF_SESSION_AFTER = _rows_after(of_job=False)
_OF_JOB_AFTER = _rows_after(of_job=True)


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

    async def rows_after(
        self, *, session_id: str, job_id: str | None, after_id: int, limit: int
    ) -> list[EventRow]:
        """`after` for a live stream, as plain rows: one prepared statement (a stream
        reads the table at every commit of its session), nothing deferred to flush (it
        runs in a read unit)."""
        params: dict[str, Any] = {"e_session": session_id, "e_after": after_id, "e_limit": limit}
        statement = _OF_SESSION_AFTER
        if job_id is not None:
            params["e_job"] = job_id
            statement = _OF_JOB_AFTER
        return [
            EventRow(id_, session, job, type_, parse_stored_json(data))
            for id_, session, job, type_, data in (await statement.execute(self.db, params)).rows
        ]

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
