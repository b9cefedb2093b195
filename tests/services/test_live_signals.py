"""Live signals reach only the readers of their session and job: a turn's deltas and
commits cost nothing to waiting requests and event streams of other sessions (counted,
as reads of the job and of the events table)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Event, Job, Session
from app.db.prepared import Peeks
from app.domain.jobs import JobStatus
from app.services import streams, waiting
from app.services.live import CANCEL, LiveHub, LiveSignal, run_clock
from app.services.live_bridge import decode, encode
from app.services.streams import StreamEvent
from app.services.waiting import wait_for_job
from app.settings import Settings
from app.wiring import runtime
from tests.support.streams import event_stream
from tests.support.units import add_rows

pytestmark = pytest.mark.timeout(60)

OTHERS = 20


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[Database]:
    db = Database(settings)
    yield db
    await db.dispose()


class Jobs:
    """`peek_job` as the waiter calls it, counted: every job runs until `end` ends it."""

    def __init__(self) -> None:
        self.reads = 0
        self.ended: set[str] = set()

    async def peek_job(self, _units: Peeks, tenant: str, job_id: str) -> Job:
        self.reads += 1
        status = JobStatus.succeeded if job_id in self.ended else JobStatus.running
        return Job(id=job_id, tenant=tenant, session_id=f"ses_{job_id}", status=status)


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Jobs:
    found = Jobs()
    monkeypatch.setattr(waiting, "peek_job", found.peek_job)
    return found


class TableReads:
    def __init__(self, real: Callable[..., Awaitable[list[StreamEvent]]]) -> None:
        self.real = real
        self.count = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> list[StreamEvent]:
        self.count += 1
        return await self.real(*args, **kwargs)


@pytest.fixture
def table_reads(monkeypatch: pytest.MonkeyPatch) -> TableReads:
    reads = TableReads(streams._durable_after)
    monkeypatch.setattr(streams, "_durable_after", reads)
    return reads


async def until(predicate: Callable[[], bool]) -> None:
    """Readiness, not time: lets the other tasks run until `predicate` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not predicate():
        assert loop.time() < deadline, "never became true"
        await asyncio.sleep(0)


async def a_turn(hub: LiveHub, session_id: str, job_id: str, steps: int = 10) -> None:
    """What a running tool loop publishes: deltas and tool signals, a commit per step,
    then the commit that ends its job; the loop's other tasks run in between, as they do
    while a runner waits for the LLM."""
    for step in range(steps):
        for n in range(5):
            hub.transient("text.delta", session_id, job_id, {"index": 0, "text": f"{step}.{n}"})
            await asyncio.sleep(0)
        hub.transient("tool.started", session_id, job_id, {"name": "Read"})
        hub.committed(session_id, job_id)
        await asyncio.sleep(0)
    hub.committed(session_id, job_id, ended=True)


async def test_waiters_of_other_jobs_read_nothing_while_a_turn_signals(
    database: Database, jobs: Jobs
) -> None:
    hub = LiveHub()
    waiters = [
        asyncio.create_task(wait_for_job(database, hub, "acme", f"job_{n}", within=60))
        for n in range(OTHERS)
    ]
    await until(lambda: jobs.reads == OTHERS)

    await a_turn(hub, "ses_turn", "job_turn")
    for n in range(OTHERS):  # each waiter's own end, after everything the turn sent
        jobs.ended.add(f"job_{n}")
        hub.committed(f"ses_{n}", f"job_{n}", ended=True)
    ended = await asyncio.gather(*waiters)

    assert [job.status for job in ended] == [JobStatus.succeeded] * OTHERS
    assert jobs.reads == 2 * OTHERS  # the first look, and the one at its end


async def test_a_waiter_reads_its_job_at_its_end_not_at_its_steps(
    database: Database, jobs: Jobs
) -> None:
    hub = LiveHub()
    waiter = asyncio.create_task(wait_for_job(database, hub, "acme", "job_1", within=60))
    await until(lambda: jobs.reads == 1)

    for _ in range(10):  # its steps: deltas and commits that leave it running
        hub.transient("text.delta", "ses_1", "job_1", {"index": 0, "text": "…"})
        hub.committed("ses_1", "job_1")
        await asyncio.sleep(0)
    jobs.ended.add("job_1")
    hub.committed("ses_1", "job_1", ended=True)
    job = await waiter

    assert job.status == JobStatus.succeeded
    assert jobs.reads == 2


async def test_a_waiter_looks_again_at_the_clocks_tick(database: Database, jobs: Jobs) -> None:
    """A job ended by another process with no bridge to bring its signal (SQLite)."""
    hub = LiveHub()
    waiter = asyncio.create_task(wait_for_job(database, hub, "acme", "job_1", within=60))
    await until(lambda: jobs.reads == 1)

    jobs.ended.add("job_1")
    hub.tick()

    assert (await waiter).status == JobStatus.succeeded


def event(session_id: str, n: int) -> Event:
    return Event(session_id=session_id, job_id=None, type="job.status", data={"n": n})


async def test_idle_streams_of_other_sessions_read_nothing_while_a_turn_commits(
    database: Database, table_reads: TableReads
) -> None:
    sessions = [f"ses_{n}" for n in range(OTHERS)]
    await database.write(add_rows(*(Session(id=s, tenant="acme") for s in [*sessions, "ses_x"])))
    hub = LiveHub()
    received: dict[str, list[StreamEvent | None]] = {s: [] for s in sessions}

    async def read(session_id: str) -> None:
        stream = event_stream(
            database,
            hub,
            session_id=session_id,
            job_id=None,
            last_event_id=0,
            keepalive_seconds=3600.0,
        )
        try:
            async for got in stream:
                received[session_id].append(got)
        finally:
            await stream.aclose()

    readers = [asyncio.create_task(read(s)) for s in sessions]
    await until(lambda: table_reads.count == OTHERS)

    for step in range(10):  # the turn's commits, each with its durable event
        await database.write(add_rows(event("ses_x", step)))
        hub.committed("ses_x", "job_x")
    await a_turn(hub, "ses_x", "job_x")
    for session_id in sessions:  # then one commit of each stream's own session
        await database.write(add_rows(event(session_id, 0)))
        hub.committed(session_id, None)
    await until(lambda: all(len(got) == 1 for got in received.values()))
    for reader in readers:
        reader.cancel()
    await asyncio.gather(*readers, return_exceptions=True)

    assert table_reads.count == 2 * OTHERS  # the first read, and the one of its own commit


async def test_an_idle_stream_reads_the_table_only_at_the_clocks_ticks(
    database: Database, table_reads: TableReads
) -> None:
    await database.write(add_rows(Session(id="ses_1", tenant="acme")))
    hub = LiveHub()
    stream = event_stream(
        database,
        hub,
        session_id="ses_1",
        job_id=None,
        last_event_id=0,
        keepalive_seconds=0.001,
    )
    try:
        keepalives = [await anext(stream) for _ in range(5)]
        before_tick = table_reads.count
        hub.tick()
        keepalives.append(await anext(stream))
    finally:
        await stream.aclose()

    assert keepalives == [None] * 6
    assert before_tick == 1  # five quiet intervals: only the first read
    assert table_reads.count == 2  # and one at the tick


@pytest.mark.sqlite_only
async def test_a_commit_of_another_writer_reaches_an_idle_stream_through_the_clock(
    settings: Settings, database: Database, table_reads: TableReads
) -> None:
    """A second `Database` on the file (another process's, in effect) commits with no
    signal to this hub: the clock's tick has the stream read it."""
    await database.write(add_rows(Session(id="ses_1", tenant="acme")))
    other = Database(settings)
    hub = LiveHub()
    stop = asyncio.Event()
    clock = asyncio.create_task(run_clock(hub, 0.01, database.alone_since_last_look, stop))
    stream = event_stream(
        database, hub, session_id="ses_1", job_id=None, last_event_id=0, keepalive_seconds=3600
    )
    try:
        first = asyncio.ensure_future(anext(stream))
        await until(lambda: table_reads.count == 1)  # it found nothing and waits
        await other.write(add_rows(event("ses_1", 7)))
        got = await asyncio.wait_for(first, 10)
    finally:
        await stream.aclose()
        stop.set()
        await clock
        await other.dispose()

    assert got is not None and got.data["n"] == 7


@pytest.mark.sqlite_only
async def test_a_process_alone_on_its_sqlite_file_wakes_no_reader_at_the_clock(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing but its own commits can reach the table, and those signal: the clock looks
    at the register and wakes nobody (but at its first look, which has nothing to compare
    with)."""
    looks: list[bool] = []
    real_look = Database.alone_since_last_look

    def look(self: Database) -> bool:
        looks.append(real_look(self))
        return looks[-1]

    ticks: list[LiveHub] = []
    monkeypatch.setattr(Database, "alone_since_last_look", look)
    monkeypatch.setattr(LiveHub, "tick", lambda self: ticks.append(self))
    async with runtime(make_settings(live_poll_seconds=0.001), with_runner=True):
        await until(lambda: len(looks) >= 20)

    assert looks[0] is False and all(looks[1:])
    assert len(ticks) == 1


def test_a_jobs_end_crosses_the_postgresql_bridge_as_an_end() -> None:
    """A waiter in another process wakes only for its job's end: the notification must
    say it is one, or it waits for the next tick."""
    signal = LiveSignal(type=None, session_id="ses_1", job_id="job_1", ended=True)

    decoded = decode(encode("origin", 1, signal))

    assert decoded is not None and decoded[1] == signal


def test_a_cancel_from_another_process_reaches_the_runner_and_no_reader() -> None:
    """A cancel crossing the bridge is the runner's (`on_cancel`), never a stream's event."""
    hub = LiveHub()
    cancelled: list[str] = []
    hub.on_cancel = cancelled.append
    sent = LiveSignal(type=CANCEL, job_id="job_1")
    decoded = decode(encode("another-process", 1, sent))
    assert decoded is not None

    with hub.subscribe(everything=True) as everything, hub.subscribe(job_id="job_1") as job:
        hub.offer(decoded[1])

        assert cancelled == ["job_1"]
        assert everything.empty() and job.empty()
