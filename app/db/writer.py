"""SQLite's one writer per process: a thread with its own connection and event loop.

SQLite lets one transaction write at a time. When write transactions ran on the
request's event loop, each held the write lock across every await of its unit of
work (and behind whatever else the loop was doing): 6-12 ms per transaction for
0.02 ms of SQLite work. Here a unit of work is handed to the writer thread once,
runs whole there on a direct connection (`app.db.sqlite_direct`, no further
hand-offs), and its result is handed back once.

Group commit: the units queued while a transaction ran are taken together and
committed by one `COMMIT`, each inside a SAVEPOINT of its own, so a unit that
fails is rolled back alone and every caller is told exactly what it would have
been told alone. A caller that stops waiting (cancelled) does not stop its unit:
a transaction is never cut in the middle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.stats import DbStats

logger = logging.getLogger("strata.db")

T = TypeVar("T")
Work = Callable[[AsyncSession], Awaitable[T]]
Deliver = Callable[[list[signals.Signal]], None]


@dataclass
class _Unit:
    work: Work[Any]
    future: concurrent.futures.Future[Any]
    deliver: Deliver

    def succeed(self, value: Any, fired: list[signals.Signal]) -> None:
        if fired:
            self.deliver(fired)
        if not self.future.cancelled():
            self.future.set_result(value)

    def fail(self, exc: BaseException) -> None:
        if not self.future.cancelled():
            self.future.set_exception(exc)


class SqliteWriter:
    """Runs units of work on a thread of its own, in order. The process's writer takes
    queued units together (`batch` > 1); its reader (batch 1, plain `BEGIN`) runs the
    small reads a running job makes every step for one hand-off each, beside the
    writer, on a connection of its own."""

    def __init__(
        self,
        make_engine: Callable[[], AsyncEngine],
        stats: DbStats,
        batch: int,
        name: str = "strata-db-writer",
    ) -> None:
        self._make_engine = make_engine
        self._stats = stats
        self._batch = batch
        self._pending: deque[_Unit] = deque()
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None
        self._closing = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    async def submit(self, work: Work[T], deliver: Deliver) -> T:
        """Run `work` as (part of) one write transaction on the writer thread."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._guard:
            if self._closing:
                raise RuntimeError("the database writer is closed")
            self._pending.append(_Unit(work, future, deliver))
        self._stats.handoffs += 2  # there and back
        assert self._loop is not None and self._ready is not None
        self._loop.call_soon_threadsafe(self._ready.set)
        return await asyncio.wrap_future(future)

    async def close(self) -> None:
        with self._guard:
            self._closing = True
        if self._loop is not None and self._ready is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._ready.set)
        await asyncio.to_thread(self._thread.join)

    # --- on the writer thread ---------------------------------------------------
    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        engine = self._make_engine()
        self._started.set()
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                while batch := self._take():
                    await self._run(engine, batch)
                with self._guard:
                    if self._closing and not self._pending:
                        break
        finally:
            await engine.dispose()

    def _take(self) -> list[_Unit]:
        with self._guard:
            count = min(len(self._pending), self._batch)
            return [self._pending.popleft() for _ in range(count)]

    async def _run(self, engine: AsyncEngine, batch: list[_Unit]) -> None:
        if len(batch) == 1:
            await self._run_alone(engine, batch[0])
        else:
            await self._run_group(engine, batch)

    async def _run_alone(self, engine: AsyncEngine, unit: _Unit) -> None:
        try:
            async with AsyncSession(engine, expire_on_commit=False) as db:
                value = await unit.work(db)
                await db.commit()
        except BaseException as exc:
            unit.fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        unit.succeed(value, signals.take(db))

    async def _run_group(self, engine: AsyncEngine, batch: list[_Unit]) -> None:
        done: list[tuple[_Unit, Any, list[signals.Signal]]] = []
        try:
            async with engine.connect() as connection:
                await connection.begin()
                for unit in batch:
                    db = AsyncSession(
                        bind=connection,
                        join_transaction_mode="create_savepoint",
                        expire_on_commit=False,
                    )
                    try:
                        value = await unit.work(db)
                        await db.commit()  # releases the unit's savepoint
                    except Exception as exc:
                        await db.rollback()  # to the unit's savepoint
                        unit.fail(exc)
                    else:
                        done.append((unit, value, signals.take(db)))
                    finally:
                        await db.close()
                await connection.commit()
        except BaseException as exc:
            for unit, _value, _fired in done:
                unit.fail(exc)
            for unit in batch:
                if not unit.future.done():
                    unit.fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for unit, value, fired in done:
            unit.succeed(value, fired)


def direct_engine(
    path: str, setup: Callable[[Any], None], stats: DbStats, *, write: bool
) -> AsyncEngine:
    """One direct connection for a unit thread: the writer's transactions begin with
    `BEGIN IMMEDIATE` (the write lock up front), the reader's with a plain `BEGIN`."""
    from app.db.sqlite_direct import direct_connector

    engine = create_async_engine(
        "sqlite+aiosqlite://",
        async_creator=direct_connector(path, setup),
        poolclass=StaticPool,
    )
    begin = "BEGIN IMMEDIATE" if write else "BEGIN"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)

    stats.watch(engine)
    return engine
