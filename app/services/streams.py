"""Event streams for SSE: durable events from the table, live signals from the hub.

Ids: a durable event's id is its row id. A live signal (text delta, tool progress) carries
`<last durable id>.<n>`, so a reconnecting client's `Last-Event-ID` still says where to
read on; live signals themselves are not replayed, the durable facts they led to are.

Every event's `data` has its `type`, `session_id` and (when it concerns one) `job_id`; a
durable event's data is what was recorded with it (for the events that are also webhooks,
the webhook's `data`). A job's stream ends once the job has ended and every event after the
client's position was sent, whatever that position is (a `Last-Event-ID` at or past the
job's last event included), so a browser's `EventSource`, which reconnects by itself, is
not kept waiting forever.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job
from app.db.models.item import AppendedItem
from app.db.repositories.events import EventRepository, EventRow
from app.db.repositories.items import ItemRepository
from app.domain.errors import InvalidInput, NotFound
from app.domain.jobs import TERMINAL
from app.services.jobs import peek_job
from app.services.live import TICK, LiveHub

BATCH = 200
# at most 18 digits: every such number is a 64-bit integer, so a schema can say it
_EVENT_ID = re.compile(r"^(0|[1-9][0-9]{0,17})(?:\.([1-9][0-9]{0,8}))?$")


@dataclass(frozen=True)
class StreamEvent:
    id: str
    type: str
    data: dict[str, Any]


def parse_last_event_id(value: str | None) -> int:
    """The durable event id a client last saw: `N` or `N.M` (a live signal after N), N a
    64-bit integer. Anything else is a 422: a stream must not start from a guess."""
    if value is None or value == "":
        return 0
    match = _EVENT_ID.match(value)
    if match is None:
        raise InvalidInput(
            "Last-Event-ID: not an event id of this stream (`N` or `N.M`, N of 1-18 digits)",
            field="Last-Event-ID",
        )
    return int(match[1])


def _data(row: EventRow, extra: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"type": row.type, "session_id": row.session_id, "job_id": row.job_id}
    data.update(row.data)
    data.update(extra)
    return data


async def _durable_after(
    database: Database, *, session_id: str, job_id: str | None, after: int
) -> list[StreamEvent]:
    """The next batch of durable events, each `item.appended` with its item: two prepared
    statements in one read unit (a stream reads at every commit of its session)."""

    async def read(db: AsyncSession) -> tuple[list[EventRow], dict[int, AppendedItem]]:
        rows = await EventRepository(db).rows_after(
            session_id=session_id, job_id=job_id, after_id=after, limit=BATCH
        )
        # the items the batch's `item.appended` events name, in one statement: a look-up
        # per event made a batch 200 reads
        seqs = [int(row.data["seq"]) for row in rows if row.type == "item.appended"]
        items = await ItemRepository(db).with_seqs(session_id, seqs)
        return rows, {item.seq: item for item in items}

    rows, found = await database.read_statements(read)
    out = []
    for row in rows:
        extra: dict[str, Any] = {}
        if row.type == "item.appended":
            item = found.get(int(row.data["seq"]))
            if item is not None:
                extra["item"] = item
        out.append(StreamEvent(id=str(row.id), type=row.type, data=_data(row, extra)))
    return out


async def nothing_left_to_stream(database: Database, job: Job, after: int) -> bool:
    """Whether `job` has ended and its stream holds nothing after `after`: such a stream
    would end empty at once (the route answers 204 instead)."""
    if job.status not in TERMINAL:
        return False

    async def read(db: AsyncSession) -> list[EventRow]:
        return await EventRepository(db).rows_after(
            session_id=job.session_id, job_id=job.id, after_id=after, limit=1
        )

    return not await database.read_statements(read)


JobEnded = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class Grant:
    """The key a stream was opened with, asked again every `seconds` (`valid()`): a key
    revoked (or expired) since ends the stream, and reconnecting with it is a 401."""

    valid: Callable[[], Awaitable[bool]]
    seconds: float


def job_has_ended(database: Database, tenant: str, job_id: str) -> JobEnded:
    """For a job's stream: whether the job has ended (or is gone)."""

    async def ended() -> bool:
        try:
            job = await peek_job(database, tenant, job_id)
        except NotFound:
            return True
        return job.status in TERMINAL

    return ended


async def event_batches(
    database: Database,
    hub: LiveHub,
    *,
    session_id: str,
    job_id: str | None,
    last_event_id: int,
    keepalive_seconds: float,
    job_ended: JobEnded | None = None,
    grant: Grant | None = None,
) -> AsyncGenerator[list[StreamEvent] | None, None]:
    """Yields events in order, in batches: what one read of the table gave, or the live
    signals queued at once (a stream writes a batch to its client in one piece, not an
    event at a time); None means 'nothing for a keep-alive interval' (send one
    keep-alive). With `job_ended` (a job's stream) it ends once that says the job has
    ended and nothing is left to send after the client's position; with `grant`, once
    the key it was opened with is no longer valid.

    The table is read at the start, at each commit of the stream's own session (a job's
    stream: of its job, every event of which carries it) and at the clock's ticks
    (`app.services.live.run_clock`), never on other sessions' signals."""
    loop = asyncio.get_running_loop()
    last = last_event_id
    live_count = 0
    quiet_since = loop.time()
    read_table = True
    closing = False  # the job was seen ended: what the read after that gives is the last
    key_due = loop.time() + grant.seconds if grant is not None else math.inf
    # a job's stream: every event it sends carries its job, and so does their commit
    own_session = session_id if job_id is None else None
    with hub.subscribe(session_id=own_session, job_id=job_id, ticks=True) as signals:
        while True:
            if grant is not None and loop.time() >= key_due:
                if not await grant.valid():
                    return
                key_due = loop.time() + grant.seconds
            if read_table or signals.take_missed():
                events = await _durable_after(
                    database, session_id=session_id, job_id=job_id, after=last
                )
                if events:
                    last = int(events[-1].id)
                    live_count = 0
                    quiet_since = loop.time()
                    yield events
                if len(events) == BATCH:
                    continue  # more to replay: no waiting in between
                if job_ended is not None:
                    if closing or any(_ends_job(e) for e in events):
                        return
                    if not events and await job_ended():
                        # it may have ended after the read above began: the event that
                        # ended it commits with its status, so one more read has it
                        closing = True
                        continue
            wait = max(0.0, quiet_since + keepalive_seconds - loop.time())
            wait = min(wait, max(0.0, key_due - loop.time()))
            signal = await signals.next(wait)
            # The table is read again when something was committed, or at a tick when
            # no signal is queued; never between live signals: deltas are published
            # before the commit of the item they add up to, so a read between two of
            # them could overtake the ones still queued.
            read_table = signal is not None and signal.type is None
            if signal is TICK and not signals.empty():
                read_table = False  # what is queued comes first; a commit among it reads
            if signal is not None and signal.type is not None:
                live: list[StreamEvent] = []
                while True:
                    live_count += 1
                    data = {"type": signal.type, "session_id": signal.session_id, **signal.data}
                    live.append(StreamEvent(f"{last}.{live_count}", signal.type, data))
                    # the live signals queued behind it go with it; a commit or a tick
                    # among them is the next one handled, after this batch
                    following = None if signals.empty() else await signals.next(0)
                    if following is None:
                        break
                    if following.type is None:
                        signals.give_back(following)
                        break
                    signal = following
                quiet_since = loop.time()
                yield live
            elif loop.time() - quiet_since >= keepalive_seconds:
                quiet_since = loop.time()
                yield None


def _ends_job(event: StreamEvent) -> bool:
    return event.type == "job.status" and event.data.get("status") in TERMINAL
