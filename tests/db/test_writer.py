"""Every write runs through `Database.write`: one writer per process, group commit,
after-commit signals.

On SQLite the units of work run on the process's writer thread; on PostgreSQL on the
pool. The behaviour callers see is the same on both.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.engine import Database
from app.db.models import Session
from app.domain.errors import Conflict


@pytest.fixture
async def database(make_settings: Any) -> AsyncIterator[Database]:
    db = Database(make_settings(sqlite_busy_timeout_ms=1))
    yield db
    await db.dispose()


def add_session(session_id: str, fail: bool = False, signal: signals.Signal | None = None) -> Any:
    async def work(db: AsyncSession) -> str:
        db.add(Session(id=session_id, tenant="acme"))
        await db.flush()
        if signal is not None:
            signals.emit(db, signal)
        if fail:
            raise Conflict(f"{session_id} refused")
        return session_id

    return work


async def count_sessions(database: Database) -> int:
    async with database.read() as db:
        return (await db.exec(select(func.count()).select_from(Session))).one()


async def test_concurrent_writers_of_one_process_never_meet_the_busy_timeout(
    database: Database,
) -> None:
    """The busy timeout is 1 ms: writers that met each other in SQLite would fail."""
    done = await asyncio.gather(*(database.write(add_session(f"ses_{n}")) for n in range(50)))

    assert sorted(done) == sorted(f"ses_{n}" for n in range(50))
    assert await count_sessions(database) == 50


async def test_a_failing_unit_is_rolled_back_alone_and_the_others_commit(
    database: Database,
) -> None:
    units = [add_session(f"ses_{n}", fail=n % 3 == 0) for n in range(12)]
    results = await asyncio.gather(*(database.write(u) for u in units), return_exceptions=True)

    failed = [r for r in results if isinstance(r, Conflict)]
    assert len(failed) == 4
    assert [r for r in results if isinstance(r, str)] == [f"ses_{n}" for n in range(12) if n % 3]
    assert await count_sessions(database) == 8


@pytest.mark.sqlite_only
async def test_writes_queued_together_commit_in_fewer_transactions(database: Database) -> None:
    before = database.stats.snapshot()
    await asyncio.gather(*(database.write(add_session(f"ses_{n}")) for n in range(40)))
    spent = database.stats.since(before)

    assert spent.transactions < 40
    assert spent.handoffs == 80  # one there and one back per unit, none per statement


async def test_signals_fire_after_the_commit_and_never_for_a_rollback(database: Database) -> None:
    fired: list[tuple[signals.Signal, int]] = []

    def listener(signal: signals.Signal) -> None:
        # what a woken reader would see at that moment
        fired.append((signal, len(fired)))

    database.listener = listener
    await database.write(add_session("ses_ok", signal=signals.Notify("ses_ok")))
    with pytest.raises(Conflict):
        await database.write(add_session("ses_bad", fail=True, signal=signals.Notify("ses_bad")))
    await asyncio.sleep(0)  # signals are delivered on the caller's loop

    assert [signal for signal, _ in fired] == [signals.Notify("ses_ok")]


async def test_signals_are_seen_only_once_the_change_is_readable(database: Database) -> None:
    seen: list[int] = []
    reads: list[asyncio.Task[int]] = []

    def listener(_signal: signals.Signal) -> None:
        reads.append(asyncio.ensure_future(count_sessions(database)))

    database.listener = listener
    await database.write(add_session("ses_1", signal=signals.WakeRunner()))
    await asyncio.sleep(0)
    seen = [await task for task in reads]

    assert seen == [1]


async def test_a_cancelled_caller_does_not_cut_its_transaction(database: Database) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def slow(db: AsyncSession) -> None:
        loop.call_soon_threadsafe(started.set)
        db.add(Session(id="ses_slow", tenant="acme"))
        await db.flush()
        await asyncio.sleep(0.2)  # still inside the transaction

    caller = asyncio.ensure_future(database.write(slow))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller

    for _ in range(500):  # the unit goes on and commits
        if await count_sessions(database) == 1:
            break
        await asyncio.sleep(0.01)
    assert await count_sessions(database) == 1


@pytest.mark.sqlite_only
async def test_reads_never_wait_behind_the_writer(database: Database) -> None:
    await database.write(add_session("ses_0"))
    holding = asyncio.Event()
    release = threading.Event()
    loop = asyncio.get_running_loop()

    async def hold_the_lock(db: AsyncSession) -> None:
        db.add(Session(id="ses_held", tenant="acme"))
        await db.flush()
        loop.call_soon_threadsafe(holding.set)
        await asyncio.to_thread(release.wait)  # the writer thread keeps the write lock

    writer = asyncio.ensure_future(database.write(hold_the_lock))
    await holding.wait()
    try:
        seen = await asyncio.wait_for(count_sessions(database), timeout=5)
    finally:
        release.set()
        await writer

    assert seen == 1  # the snapshot before the uncommitted write
    assert await count_sessions(database) == 2


@pytest.mark.sqlite_only
async def test_sqlite_keeps_its_read_connections_open_between_reads(make_settings: Any) -> None:
    """A runner of many jobs reads concurrently; with SQLAlchemy's pool of 5, every read
    past the fifth would open a connection (and run its pragmas) and close it after use."""
    database = Database(make_settings(sqlite_read_connections=12))
    release = asyncio.Event()

    async def read_and_wait() -> None:
        async with database.read() as db:
            await db.exec(select(func.count()).select_from(Session))
            await release.wait()

    try:
        readers = [asyncio.create_task(read_and_wait()) for _ in range(12)]
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(*readers)
        assert database.engine.sync_engine.pool.checkedin() == 12  # type: ignore[attr-defined]
    finally:
        await database.dispose()


@pytest.mark.sqlite_only
async def test_a_unit_that_breaks_the_writers_connection_leaves_the_next_one_working(
    database: Database,
) -> None:
    async def break_it(db: AsyncSession) -> None:
        connection = await db.connection()
        assert connection.sync_connection is not None
        driver = connection.sync_connection.connection.driver_connection
        assert driver is not None
        driver.raw.close()

    with pytest.raises(Exception):  # noqa: B017 - whichever error the closed handle gives
        await database.write(break_it)

    assert await database.write(add_session("ses_after")) == "ses_after"
    assert await count_sessions(database) == 1


@pytest.mark.sqlite_only
async def test_closing_runs_every_unit_queued_before_it_and_refuses_later_ones(
    make_settings: Any,
) -> None:
    """A shutdown loses no write that was accepted: the units queued when the writer is
    closed (more than one batch of them) all commit, and a unit submitted after is
    refused at once instead of waiting for a thread that is gone."""
    settings = make_settings(db_write_batch_max=4)
    database = Database(settings)
    writes = [asyncio.ensure_future(database.write(add_session(f"ses_{n}"))) for n in range(30)]
    await asyncio.sleep(0)  # every write is queued: each submits before it first waits
    await database.dispose()

    assert [await write for write in writes] == [f"ses_{n}" for n in range(30)]
    with pytest.raises(RuntimeError, match="closed"):
        await database.write(add_session("ses_late"))
    reopened = Database(settings)
    try:
        assert await count_sessions(reopened) == 30
    finally:
        await reopened.dispose()
