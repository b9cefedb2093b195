"""Event streams for SSE: durable events from the table, live signals from the hub.

Ids: a durable event's id is its row id. A live signal (text delta, tool
progress) carries `<last durable id>.<n>`, so a reconnecting client's
`Last-Event-ID` still says where to read on; live signals themselves are not
replayed, the durable facts they led to are.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.db.engine import Database
from app.db.models import Event
from app.db.repositories.events import EventRepository
from app.db.repositories.items import ItemRepository
from app.domain.jobs import TERMINAL
from app.services.live import LiveHub, LiveSignal

BATCH = 200


@dataclass(frozen=True)
class StreamEvent:
    id: str
    type: str
    data: dict[str, Any]


def parse_last_event_id(value: str | None) -> int:
    if not value:
        return 0
    head = value.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


async def _durable_after(
    database: Database, *, session_id: str | None, job_id: str | None, after: int
) -> list[tuple[Event, dict[str, Any]]]:
    async with database.read() as db:
        rows = await EventRepository(db).after(
            session_id=session_id, job_id=job_id, after_id=after, limit=BATCH
        )
        out = []
        items = ItemRepository(db)
        for row in rows:
            data = dict(row.data)
            if row.type == "item.appended":
                item = await items.get(row.session_id, int(data["seq"]))
                if item is not None:
                    data["item"] = item
            out.append((row, data))
        return out


async def event_stream(
    database: Database,
    hub: LiveHub,
    *,
    session_id: str | None,
    job_id: str | None,
    last_event_id: int,
    poll_seconds: float,
    keepalive_seconds: float,
    until_job_ends: bool = False,
) -> AsyncIterator[StreamEvent | None]:
    """Yields events in order; None means 'nothing for a while' (send a keep-alive)."""
    last = last_event_id
    live_count = 0
    idle = 0.0
    read_table = True
    with hub.subscribe() as signals:
        while True:
            if read_table:
                for row, data in await _durable_after(
                    database, session_id=session_id, job_id=job_id, after=last
                ):
                    last = row.id or last
                    live_count = 0
                    yield StreamEvent(id=str(last), type=row.type, data=data)
                    if until_job_ends and row.type == "job.status" and _ended(data):
                        return
            signal = await _next_signal(signals, poll_seconds)
            # The table is read again when something was committed here, or after a
            # quiet poll interval (a runner in another process); never between live
            # signals: deltas are published before the commit of the item they add up
            # to, so a read between two of them could overtake the ones still queued.
            read_table = signal is None or signal.type is None
            if signal is None:
                idle += poll_seconds
                if idle >= keepalive_seconds:
                    idle = 0.0
                    yield None
                continue
            idle = 0.0
            if signal.type is not None and _matches(signal, session_id, job_id):
                live_count += 1
                yield StreamEvent(id=f"{last}.{live_count}", type=signal.type, data=signal.data)


def _ended(data: dict[str, Any]) -> bool:
    return data.get("status") in TERMINAL


def _matches(signal: LiveSignal, session_id: str | None, job_id: str | None) -> bool:
    if session_id is not None and signal.session_id != session_id:
        return False
    return job_id is None or signal.job_id == job_id


async def _next_signal(signals: asyncio.Queue[LiveSignal], seconds: float) -> LiveSignal | None:
    try:
        return await asyncio.wait_for(signals.get(), timeout=seconds)
    except TimeoutError:
        return None
