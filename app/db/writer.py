"""SQLite's one writer per process: a thread with its own connection.

SQLite lets one transaction write at a time. A write transaction on the request's
event loop would hold the write lock across every await of its unit of work (and
behind whatever else the loop is doing): milliseconds per transaction for a few
hundredths of a millisecond of SQLite work. So a unit of work is handed to the writer
thread once, runs whole there on a direct connection (`app.db.sqlite_direct`, no
further hand-offs), and its result is handed back once.

Group commit: the units queued while a transaction ran are taken together and
committed by one `COMMIT`, each inside a SAVEPOINT of its own, so a unit that
fails is rolled back alone and every caller is told exactly what it would have
been told alone. A caller that stops waiting (cancelled) does not stop its unit:
a transaction is never cut in the middle.

Statement units (`statements=True`, what a running job writes on every step) run
prepared statements (`app.db.prepared`) without an ORM transaction: they run on a
direct connection of the writer's own, begun and committed with SQLite's own
statements. Through the session's machinery (a pool checkout, the transaction's
bookkeeping and the greenlet bridge, both ways) a unit costs ~0.4 ms more than the
SQLite work it holds. What such a unit does ask of the ORM (a job's end that queues a
summary job) runs in the same unit, once, on a connection joined to its transaction
(`JoinedConnection`), checked out only then.

The thread waits on a queue, not in an event loop, and a batch of statement units
runs without one: everything such a unit awaits returns at once (the direct
connection's calls are coroutines that never suspend), so its coroutine is driven to
its end in one step (`_drive`), and one that would wait for something is failed. An
event loop serving every batch cost two of its turns, a poll and a read of its
wake-up pipe per unit. Batches with ORM units run on an event loop of the thread's
own (SQLAlchemy's async sessions close in a task of their own).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.prepared import as_sqlalchemy_error, statement_session
from app.db.sqlite_direct import DirectConnection, JoinedConnection
from app.db.stats import DbStats
from app.observability import tracing

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
    statements: bool
    # the caller's trace context: the unit's SQL spans belong to the caller's trace
    trace: Any = None
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


async def _statement_unit(unit: _Unit, db: AsyncSession) -> Any:
    """Run a statement unit's work, once. What it asked of the ORM (a query, a row to
    add) ran on a connection joined to the unit's transaction; what it staged is flushed
    there before the unit ends, and the session lets go of that connection (its commit
    and rollback are the writer's, `JoinedConnection`)."""
    try:
        value = await unit.work(db)
        if db.new or db.dirty or db.deleted or db.in_transaction():
            await db.commit()  # the flush; the transaction is the writer's to end
    finally:
        await db.close()
    return value


_SUSPENDED = "a unit of work waited for something on the database writer thread"


def _drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to its end on this thread, without an event loop. It must never
    suspend: on the writer thread nothing is there to resume it."""
    try:
        coroutine.send(None)
        # it waits for something: fail it there, so that its transaction is rolled back
        # and its callers are told, as for any failure
        coroutine.throw(RuntimeError(_SUSPENDED))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError(_SUSPENDED)


Done = tuple[_Unit, Any, list[signals.Signal]]
"""A unit that ran to its end in a batch: its value and the signals it recorded."""


def _settle_all(units: list[_Unit]) -> None:
    for unit in units:
        unit.settle()


class SqliteWriter:
    """Runs units of work on a thread of its own, in order, taking the units queued
    meanwhile together (up to `batch`).

    A hand-off is one wake-up each way: the writer answers all the units of a batch
    that came from one event loop with one callback there (a thread's wake-up is a
    system call, and on some virtual machines a system call costs more than a small
    transaction). `on_commit` runs on the writer thread after each commit, before the
    next unit starts (the caches' forgetting)."""

    def __init__(
        self,
        make_engine: Callable[[], AsyncEngine],
        make_connection: Callable[[], Awaitable[DirectConnection]],
        stats: DbStats,
        batch: int,
        name: str = "strata-db-writer",
        on_commit: Fire | None = None,
    ) -> None:
        """`make_engine` gives the engine of the units that use an ORM session,
        `make_connection` the connection the statement units run on."""
        self._make_engine = make_engine
        self._make_connection = make_connection
        self._direct: DirectConnection | None = None
        # by `sqlite3` connection: the engines of the ORM parts of statement units
        self._joined_engines: dict[sqlite3.Connection, AsyncEngine] = {}
        self._stats = stats
        self._batch = batch
        self._on_commit = on_commit
        # units to run; None, put last by `close`, stops the thread
        self._queue: queue.SimpleQueue[_Unit | None] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._closing = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    async def submit(self, work: Work[T], fire: Fire, *, statements: bool = False) -> T:
        """Run `work` as (part of) one write transaction on the writer thread; `fire`
        gets its signals on this loop once it committed. A statement unit's `work` gets
        a session whose prepared statements run past the ORM (`statement_session`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._guard:
            if self._closing:
                raise RuntimeError("the database writer is closed")
            self._queue.put(_Unit(work, loop, future, fire, statements, tracing.current_context()))
        self._stats.handoffs += 2  # there and back
        # a caller that stops waiting cancels only this future, not its unit: the writer
        # runs every unit it took, whole, and `settle` fires its signals all the same
        # (no `shield`: it would cost one more turn of the caller's loop per write)
        return await future

    async def close(self) -> None:
        with self._guard:
            if not self._closing:
                self._closing = True
                self._queue.put(None)  # after every unit: no submit gets past the guard now
        await asyncio.to_thread(self._thread.join)

    # --- on the writer thread ---------------------------------------------------
    def _main(self) -> None:
        loop = asyncio.new_event_loop()  # for the batches with ORM units
        engine = self._make_engine()
        self._started.set()
        try:
            while batch := self._take():
                self._run(loop, engine, batch)
        finally:
            if self._direct is not None:
                self._direct.stop()
            for joined in self._joined_engines.values():
                loop.run_until_complete(joined.dispose())
            loop.run_until_complete(engine.dispose())
            loop.close()

    def _run(
        self, loop: asyncio.AbstractEventLoop, engine: AsyncEngine, batch: list[_Unit]
    ) -> None:
        """Run the batch, then answer each of its units. Statement units need no event
        loop; the thread outlives any batch."""
        try:
            if all(unit.statements for unit in batch):
                _drive(self._run_statements(engine, batch))
            elif len(batch) == 1:
                loop.run_until_complete(self._run_alone(engine, batch[0]))
            else:
                loop.run_until_complete(self._run_group(engine, batch))
        except Exception:
            logger.exception("the database writer could not finish a batch")
        finally:
            self._answer(batch)

    def _take(self) -> list[_Unit]:
        """The next units, up to a batch: waits for the first, takes what else is queued.
        Empty once `close` was called and every unit before it ran."""
        first = self._queue.get()
        batch: list[_Unit] = []
        while first is not None:
            batch.append(first)
            if len(batch) == self._batch:
                break
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                break
        else:
            if batch:  # the stop came behind these: run them, then stop
                self._queue.put(None)
        return batch

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
                with tracing.attached(unit.trace):
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
        done: list[Done] = []
        try:
            async with engine.connect() as connection:
                await connection.begin()
                for unit in batch:
                    if unit.statements:
                        sync = connection.sync_connection
                        assert sync is not None  # begun above
                        direct = sync.connection.driver_connection
                        assert isinstance(direct, DirectConnection)
                        await self._run_statement_unit(direct, engine, unit, done, savepoint=True)
                        continue
                    db = AsyncSession(
                        bind=connection,
                        join_transaction_mode="create_savepoint",
                        expire_on_commit=False,
                    )
                    try:
                        with tracing.attached(unit.trace):
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
            self._failed(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._succeeded(done)

    @staticmethod
    def _failed(batch: list[_Unit], exc: BaseException) -> None:
        """The batch's transaction failed: each unit is told so, unless it failed alone."""
        for unit in batch:
            if not isinstance(unit.outcome, BaseException):
                unit.outcome = exc

    def _succeeded(self, done: list[Done]) -> None:
        """The batch committed: its signals go to `on_commit`, each unit gets its answer."""
        self._committed([signal for _unit, _value, fired in done for signal in fired])
        for unit, value, fired in done:
            unit.outcome = (value, fired)

    # --- statement units ----------------------------------------------------------
    async def _connection(self) -> DirectConnection:
        if self._direct is None:
            self._direct = await self._make_connection()
        return self._direct

    async def _run_statements(self, engine: AsyncEngine, batch: list[_Unit]) -> None:
        """Statement units, together in one transaction on the writer's direct connection."""
        done: list[Done] = []
        try:
            direct = await self._connection()
            try:  # a BEGIN that fails on a broken connection drops it too
                self._raw(direct, "BEGIN IMMEDIATE")
                alone = len(batch) == 1  # its failure is the transaction's: no savepoint
                for unit in batch:
                    await self._run_statement_unit(direct, engine, unit, done, savepoint=not alone)
                self._raw(direct, "COMMIT", counted=False)  # counted as the transaction
            except BaseException:
                self._stop_transaction(direct)
                raise
            finally:
                self._stats.transactions += 1
        except BaseException as exc:
            # `_drive` closed a unit that waited again after being failed: its callers
            # learn why, not the internal GeneratorExit
            self._failed(batch, RuntimeError(_SUSPENDED) if isinstance(exc, GeneratorExit) else exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._succeeded(done)

    async def _run_statement_unit(
        self,
        direct: DirectConnection,
        engine: AsyncEngine,
        unit: _Unit,
        done: list[Done],
        *,
        savepoint: bool,
    ) -> None:
        """One statement unit inside the open transaction. In a `savepoint` of its own, a
        unit that fails is undone alone and told so; without one its failure is raised."""
        db = statement_session(direct, engine.dialect, self._joined(direct))
        if not savepoint:
            with tracing.attached(unit.trace):
                value = await _statement_unit(unit, db)
            done.append((unit, value, signals.take(db)))
            return
        self._raw(direct, "SAVEPOINT strata_unit")
        try:
            with tracing.attached(unit.trace):
                value = await _statement_unit(unit, db)
        except Exception as exc:
            self._raw(direct, "ROLLBACK TO strata_unit")
            self._raw(direct, "RELEASE strata_unit")
            unit.outcome = exc
            return
        self._raw(direct, "RELEASE strata_unit")
        done.append((unit, value, signals.take(db)))

    def _joined(self, direct: DirectConnection) -> AsyncEngine:
        """An engine whose one connection is `direct`'s, in whatever transaction the writer
        opened there: the ORM part of a statement unit runs on it, inside the unit."""
        raw = direct.raw
        found = self._joined_engines.get(raw)
        if found is None:

            async def connect() -> JoinedConnection:
                return JoinedConnection(raw)

            found = create_async_engine(
                "sqlite+aiosqlite://", async_creator=connect, poolclass=StaticPool
            )

            @event.listens_for(found.sync_engine, "before_cursor_execute")
            def _statement(*_args: Any) -> None:
                self._stats.statements += 1

            self._joined_engines[raw] = found
        return found

    def _raw(self, direct: DirectConnection, sql: str, *, counted: bool = True) -> None:
        if counted:
            self._stats.statements += 1
        try:
            direct.raw.execute(sql)
        except Exception as exc:
            raise as_sqlalchemy_error(exc, sql, ()) from exc

    def _stop_transaction(self, direct: DirectConnection) -> None:
        """After a failure: roll back what is open; a connection that cannot even do that
        is dropped, and the next statement unit opens a new one."""
        try:
            if direct.raw.in_transaction:
                direct.raw.rollback()
        except Exception:
            logger.warning("the writer's direct connection failed; opening a new one")
            self._joined_engines.pop(direct.raw, None)
            direct.stop()
            self._direct = None
