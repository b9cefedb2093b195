"""Durable events: written in the transaction of the change they report; once it
commits, live streams of the session are told to read again."""

from __future__ import annotations

from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.repositories.events import EventRepository


async def record_event(
    db: AsyncSession,
    session_id: str,
    type_: str,
    data: dict[str, Any],
    *,
    job_id: str | None = None,
) -> None:
    signals.emit(db, signals.Notify(session_id, job_id))
    await EventRepository(db).insert(session_id, job_id, type_, data)
