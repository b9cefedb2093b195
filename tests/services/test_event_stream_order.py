"""An event stream keeps live signals in order with the durable events they lead to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Event, Session
from app.domain.items import Origin, user_text
from app.services.items import append_item
from app.services.live import LiveHub, run_clock
from app.services.streams import event_batches
from app.settings import Settings
from tests.support.streams import event_stream
from tests.support.units import add_rows


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[Database]:
    db = Database(settings)
    yield db
    await db.dispose()


def job_status(n: int) -> Event:
    return Event(session_id="ses_1", job_id="job_1", type="job.status", data={"n": n})


async def test_deltas_queued_before_a_commit_are_sent_before_its_events(
    database: Database,
) -> None:
    await database.write(add_rows(Session(id="ses_1", tenant="acme"), job_status(0)))
    hub = LiveHub()
    stream = event_stream(
        database,
        hub,
        session_id="ses_1",
        job_id=None,
        last_event_id=0,
        keepalive_seconds=60.0,
    )

    async def next_event() -> tuple[str, str]:
        event = await asyncio.wait_for(anext(stream), timeout=2)
        assert event is not None
        return event.type, event.id

    try:
        seen = [await next_event()]  # the stream is subscribed to the hub from here on
        # the runner streams two deltas, then commits the item they add up to
        hub.transient("text.delta", "ses_1", "job_1", {"text": "Hello"})
        hub.transient("text.delta", "ses_1", "job_1", {"text": " world"})
        seen.append(await next_event())
        await database.write(add_rows(job_status(1)))
        hub.committed("ses_1", "job_1")
        seen += [await next_event(), await next_event()]
    finally:
        await stream.aclose()

    first_id = seen[0][1]
    assert [kind for kind, _ in seen] == ["job.status", "text.delta", "text.delta", "job.status"]
    assert seen[1:3] == [("text.delta", f"{first_id}.1"), ("text.delta", f"{first_id}.2")]
    assert int(seen[3][1]) > int(first_id)


async def test_a_batch_of_item_events_reads_its_items_in_one_statement(database: Database) -> None:
    """Each `item.appended` event carries its item; looked up one by one, a batch of 30
    events cost 30 reads more."""

    async def thirty_items(db: AsyncSession) -> None:
        db.add(Session(id="ses_1", tenant="acme"))
        await db.flush()
        for n in range(30):
            await append_item(db, "ses_1", user_text(f"message {n}"), Origin.user)

    await database.write(thirty_items)
    stream = event_stream(
        database,
        LiveHub(),
        session_id="ses_1",
        job_id=None,
        last_event_id=0,
        keepalive_seconds=60.0,
    )
    before = database.stats.snapshot()
    try:
        events = [await asyncio.wait_for(anext(stream), timeout=2) for _ in range(30)]
    finally:
        await stream.aclose()
    read = database.stats.since(before)

    texts = [e.data["item"].payload["content"][0]["text"] for e in events if e is not None]
    assert texts == [f"message {n}" for n in range(30)]
    assert read.statements <= 4  # BEGIN, the events, their items (once per batch)


async def test_a_job_that_ends_between_the_streams_read_and_its_look_at_the_job_still_sends_its_end(
    database: Database,
) -> None:
    """The job's end (its status and its `job.status` event, one transaction) may commit
    after the stream read the table and before it looked whether the job has ended: the
    stream still sends the event that says how the job ended (without it, a console page
    would show the job running for good)."""
    await database.write(add_rows(Session(id="ses_1", tenant="acme"), job_status(0)))
    ended = False

    async def job_ended() -> bool:
        nonlocal ended
        if not ended:  # the job's end commits just now
            end = {"status": "succeeded"}
            await database.write(
                add_rows(Event(session_id="ses_1", job_id="job_1", type="job.status", data=end))
            )
            ended = True
        return True

    hub = LiveHub()
    stop = asyncio.Event()
    clock = asyncio.create_task(run_clock(hub, 0.01, lambda: False, stop))
    stream = event_stream(
        database,
        hub,
        session_id="ses_1",
        job_id="job_1",
        last_event_id=0,
        keepalive_seconds=60.0,
        job_ended=job_ended,
    )
    try:
        events = [event async for event in stream]
    finally:
        await stream.aclose()
        stop.set()
        await clock

    assert [e.data.get("status") for e in events if e is not None] == [None, "succeeded"]


async def test_live_signals_queued_at_once_are_one_batch_and_a_commit_behind_them_the_next(
    database: Database,
) -> None:
    """A stream writes a batch to its client in one piece: the live signals queued when
    it looks go together, and a commit queued behind them is read after them."""
    await database.write(add_rows(Session(id="ses_1", tenant="acme"), job_status(0)))
    hub = LiveHub()
    batches = event_batches(
        database,
        hub,
        session_id="ses_1",
        job_id=None,
        last_event_id=0,
        keepalive_seconds=60.0,
    )

    async def next_batch() -> list[str]:
        batch = await asyncio.wait_for(anext(batches), timeout=2)
        assert batch is not None
        return [event.type for event in batch]

    try:
        first = await next_batch()  # the stream is subscribed to the hub from here on
        hub.transient("tool.started", "ses_1", "job_1", {"name": "current_time"})
        hub.transient("tool.finished", "ses_1", "job_1", {"name": "current_time"})
        await database.write(add_rows(job_status(1), job_status(2)))
        hub.committed("ses_1", "job_1")
        live, durable = await next_batch(), await next_batch()
    finally:
        await batches.aclose()

    assert first == ["job.status"]
    assert live == ["tool.started", "tool.finished"]
    assert durable == ["job.status", "job.status"]
