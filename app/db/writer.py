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
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.stats import DbStats

logger = logging.getLogger("strata.db")

T = TypeVar("T")
Work = Callable[[AsyncSession], Awaitable[T]]
Fire = Callable[[list[signals.Signal]], None]


@dataclass
class _Unit:
    work: Work[Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    fire: Fire
    outcome: tuple[Any, list[signals.Signal]] | BaseException | None = None

    def settle(self) -> None:
        """On the caller's loop: the signals of a committed unit fire even when nobody
        waits for its answer any more; then the caller is answered."""
        outcome = self.outcome
        if isinstance(outcome, BaseException):
            if not self.future.done():
                self.future.set_exception(outcome)
            else:  # nobody will look: mark it seen
                outcome.__traceback__ = None
            return
        assert outcome is not None
        value, fired = outcome
        if fired:
            self.fire(fired)
        if not self.future.done():
            self.future.set_result(value)


def _settle_all(units: list[_Unit]) -> None:
    for unit in units:
        unit.settle()


class SqliteWriter:
    """Runs units of work on a thread of its own, in order. The process's writer takes
    queued units together (`batch` > 1); its reader (batch 1, plain `BEGIN`) runs the
    small reads a running job makes for one hand-off each, beside the writer, on a
    connection of its own.

    A hand-off is one wake-up each way: the writer answers all the units of a batch
    that came from one event loop with one callback there (a thread's wake-up is a
    system call, and on some virtual machines a system call costs more than a small
    transaction). `on_commit` runs on the writer thread after each commit, before the
    next unit starts (the caches' forgetting)."""

    def __init__(
        self,
        make_engine: Callable[[], AsyncEngine],
        stats: DbStats,
        batch: int,
        name: str = "strata-db-writer",
        on_commit: Fire | None = None,
    ) -> None:
        self._make_engine = make_engine
        self._stats = stats
        self._batch = batch
        self._on_commit = on_commit
        self._pending: deque[_Unit] = deque()
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None
        self._closing = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    async def submit(self, work: Work[T], fire: Fire) -> T:
        """Run `work` as (part of) one write transaction on the writer thread; `fire`
        gets its signals on this loop once it committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._guard:
            if self._closing:
                raise RuntimeError("the database writer is closed")
            self._pending.append(_Unit(work, loop, future, fire))
        self._stats.handoffs += 2  # there and back
        assert self._loop is not None and self._ready is not None
        self._loop.call_soon_threadsafe(self._ready.set)
        # a caller that stops waiting does not stop its unit: a transaction is never
        # cut in the middle, and its signals still fire
        return await asyncio.shield(future)

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
        try:
            if len(batch) == 1:
                await self._run_alone(engine, batch[0])
            else:
                await self._run_group(engine, batch)
        finally:
            self._answer(batch)

    def _answer(self, batch: list[_Unit]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Unit]] = {}
        for unit in batch:
            by_loop.setdefault(unit.loop, []).append(unit)
        for loop, units in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_all, units)
            except RuntimeError:  # that loop is closed: nobody is left to answer
                logger.debug("a unit of work finished after its event loop closed")

    def _committed(self, fired: list[signals.Signal]) -> None:
        if fired and self._on_commit is not None:
            self._on_commit(fired)

    async def _run_alone(self, engine: AsyncEngine, unit: _Unit) -> None:
        try:
            async with AsyncSession(engine, expire_on_commit=False) as db:
                value = await unit.work(db)
                await db.commit()
        except BaseException as exc:
            unit.outcome = exc
            if not isinstance(exc, Exception):
                raise
            return
        fired = signals.take(db)
        self._committed(fired)
        unit.outcome = (value, fired)

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
                        unit.outcome = exc
                    else:
                        done.append((unit, value, signals.take(db)))
                    finally:
                        await db.close()
                await connection.commit()
        except BaseException as exc:
            for unit in batch:
                if not isinstance(unit.outcome, BaseException):  # not its own failure
                    unit.outcome = exc
            if not isinstance(exc, Exception):
                raise
            return
        fired = [signal for _unit, _value, signals_ in done for signal in signals_]
        self._committed(fired)
        for unit, value, unit_signals in done:
            unit.outcome = (value, unit_signals)
