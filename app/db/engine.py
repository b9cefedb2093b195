"""The engine, the sessionmakers and the single commit point.

SQLite notes: the file is switched to WAL once, when the `Database` is made, and
every connection gets a busy timeout and foreign keys. The
driver's own transaction handling is switched off and `BEGIN` is issued by us, so
that the writer's transactions start with `BEGIN IMMEDIATE`: a deferred
transaction that reads first and writes later can fail with SQLITE_BUSY without
waiting. All writes of a process run on one writer thread (`app.db.writer`);
reads run on the event loop, on direct connections (`direct_engine`), and in WAL
mode never wait for a writer.

PostgreSQL notes (psycopg 3, `postgresql+psycopg://`): a pooled connection the server
closed is replaced before use instead of failing a request: its socket says so at once,
and one idle for longer than `STRATA_DB_PING_IDLE_SECONDS` is also pinged
(`install_checkout_checks`). Writers need no special BEGIN: row locks
(`FOR UPDATE`, `UPDATE … RETURNING`) serialise what must be serialised.
PostgreSQL cannot hold U+0000 (see `app.db.nul`).
"""

from __future__ import annotations

import asyncio
import logging
import select
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, StaticPool
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches, deferred, signals, stats
from app.db.availability import Availability
from app.db.nul import json_without_nul, without_nul
from app.db.prepared import Prepared, SqlitePeeker, as_sqlalchemy_error
from app.db.sqlite_direct import direct_connector
from app.db.stats import DbStats
from app.db.writer import SqliteWriter, Work
from app.db.writers import WriterRegister
from app.settings import Settings

logger = logging.getLogger("strata.db")
T = TypeVar("T")


def sync_url(database_url: str) -> str:
    """The URL Alembic and other synchronous tools use."""
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername == "sqlite+aiosqlite":
        url = url.set(drivername="sqlite")
    return url.render_as_string(hide_password=False)


def async_url(database_url: str) -> str:
    url = make_url(sync_url(database_url))
    if url.drivername == "sqlite":
        url = url.set(drivername="sqlite+aiosqlite")
    return url.render_as_string(hide_password=False)


def is_sqlite(database_url: str) -> bool:
    return make_url(database_url).get_backend_name() == "sqlite"


# the classes a transient error (`is_transient`) is an instance of
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (DBAPIError, TimeoutError, ConnectionError)


def is_transient(exc: BaseException) -> bool:
    """A database error that says 'not now' rather than 'never': SQLite busy or locked,
    a connection lost or refused (a restarting PostgreSQL). Retrying later may succeed."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError | InterfaceError | TimeoutError | ConnectionError)


def ensure_sqlite_dir(database_url: str) -> None:
    """Create the folder of a SQLite file so a fresh checkout needs no manual step."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def sqlite_setup(busy_timeout_ms: int) -> Callable[[Any], None]:
    """A busy timeout and foreign keys for a new `sqlite3` connection, whose own
    transaction handling is off (`BEGIN` is issued by us). WAL is the file's, set once
    by `switch_to_wal`."""

    def setup(dbapi_connection: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return setup


_WAL_RETRY_SECONDS = 0.01


def switch_to_wal(path: str, busy_timeout_ms: int) -> None:
    """Put the SQLite file at `path` in WAL mode, which the file keeps, before this
    process opens its connections. Were each new connection to switch it, the first
    connections to a new file (the writer thread's, a read, the dispatcher's peek) could
    race: each holds a shared lock and wants the exclusive one, and SQLite fails one of
    them at once with "database is locked" — a busy timeout does not help a deadlock.
    Another process may still race for the switch, or be writing to the file in its old
    mode: such a failure is retried until `busy_timeout_ms` has passed."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    connection = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    try:
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                # a deadlock is not waited for: another connection in the midst of a write
                # (or of the same switch) fails it at once, so wait here instead
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(_WAL_RETRY_SECONDS)
    finally:
        connection.close()


def install_sqlite_hooks(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    """The pragmas on every connection of a (reading) aiosqlite engine, and a plain
    `BEGIN` for its transactions."""
    setup = sqlite_setup(busy_timeout_ms)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        setup(dbapi_connection)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")


def direct_engine(
    path: str,
    setup: Callable[[Any], None],
    stats: DbStats,
    *,
    write: bool,
    read_connections: int = 1,
) -> AsyncEngine:
    """An engine of direct `sqlite3` connections (`app.db.sqlite_direct`), which run each
    statement at once on the calling thread: no thread hand-off per call.

    The writer's has one connection, used only on the writer thread; its transactions
    begin with `BEGIN IMMEDIATE` (the write lock up front). The reads' engine is a pool
    of connections used on the event loop: in WAL mode a read never waits for a writer,
    so a statement costs SQLite's own work, microseconds to milliseconds, without the
    two thread hops per call aiosqlite makes (and the rows' processing in Python ran on
    the loop anyway). Their transactions begin with a plain `BEGIN`."""
    # the URL names no file (the creator opens it), which SQLAlchemy would take for
    # an in-memory database and give one shared connection: say which pool
    pool: dict[str, Any] = (
        {"poolclass": StaticPool}
        if write
        else {"poolclass": AsyncAdaptedQueuePool, "pool_size": read_connections}
    )
    engine = create_async_engine(
        "sqlite+aiosqlite://", async_creator=direct_connector(path, setup), **pool
    )
    begin = "BEGIN IMMEDIATE" if write else "BEGIN"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # straight to sqlite3: through SQLAlchemy's execution, a BEGIN costs ~0.1 ms
        stats.statements += 1
        try:
            conn.connection.driver_connection.raw.execute(begin)
        except Exception as exc:
            raise as_sqlalchemy_error(exc, begin, ()) from exc

    stats.watch(engine)

    return engine


_LAST_USED = "strata.last_used"


def ping(dbapi_connection: Any) -> None:
    """One round trip on a pooled connection: raises when the server is gone."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT 1")
    finally:
        cursor.close()


def server_closed(driver_connection: Any) -> bool:
    """Whether the server closed (or is closing) a connection at rest, without a round
    trip: such a connection has nothing to read unless the server hung up or sent its
    last error. One poll of the socket, microseconds."""
    try:
        fd = driver_connection.pgconn.socket
    except Exception:  # psycopg raises once the connection is closed
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def install_checkout_checks(
    engine: AsyncEngine, idle_seconds: float, clock: Callable[[], float] = time.monotonic
) -> None:
    """Check a pooled connection before use: a look at its socket every time, a ping
    (one round trip) only when it sat idle for `idle_seconds`.

    SQLAlchemy's `pool_pre_ping` pings at every checkout: one more round trip for every
    request and every write unit. A server that ended a connection (restart, admin
    terminate) has closed its socket, which the look sees; the ping is for what it cannot
    see, a peer gone without a word (a dropped network path), which matters after a long
    idle. A connection that fails either check is replaced at once."""

    @event.listens_for(engine.sync_engine.pool, "connect")
    def _connected(_dbapi_connection: Any, record: Any) -> None:
        record.info[_LAST_USED] = clock()

    @event.listens_for(engine.sync_engine.pool, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_LAST_USED] = clock()

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if server_closed(record.driver_connection):
            raise DisconnectionError("the server closed a pooled connection")
        last = record.info.get(_LAST_USED)
        if last is not None and clock() - last < idle_seconds:
            return
        try:
            ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("a pooled connection failed its ping") from exc


def _install_postgresql_hooks(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "before_cursor_execute", retval=True)
    def _on_execute(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
    ) -> tuple[str, Any]:
        return statement, without_nul(parameters)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a unit's outcome as seen when nobody waits for it any more."""
    if not task.cancelled():
        task.exception()


class UnitsOfWork(Protocol):
    """Reads and writes: the `Database` itself, or a running job's fenced view of it."""

    def read(self) -> AbstractAsyncContextManager[AsyncSession]: ...

    async def read_unit(self, work: Work[T]) -> T: ...

    async def peek(
        self, statement: Prepared, params: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]: ...

    async def read_statements(self, work: Work[T]) -> T: ...

    async def write(self, work: Work[T]) -> T: ...

    async def write_statements(self, work: Work[T]) -> T: ...


class Database:
    """Owns the engines; hands out read units of work and runs write units of work.

    Reads run on the caller's event loop and see a consistent snapshot (WAL on
    SQLite), never waiting behind a writer. Every write runs through `write`: on
    SQLite on the process's one writer thread (`app.db.writer`), on PostgreSQL on a
    pooled connection; either way it commits whole or not at all, and the signals it
    recorded (`app.db.signals`) reach `listener` only after the commit.
    """

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` (seconds) times the caches' entries."""
        ensure_sqlite_dir(settings.database_url)
        self.is_sqlite = is_sqlite(settings.database_url)
        self.stats = DbStats()
        self.availability = Availability()
        self.listener: signals.Listener | None = None
        self.caches = caches.Caches(
            {
                caches.API_KEYS: settings.api_key_cache_seconds,
                caches.WEBHOOKS: settings.webhook_cache_seconds,
            },
            max_entries=settings.cache_max_entries,
            clock=clock,
            weighed={
                caches.SESSION_VIEWS: caches.Weighed(
                    settings.job_session_cache_seconds,
                    settings.job_session_cache_entries,
                    settings.job_session_cache_items,
                )
            },
        )
        self._writer: SqliteWriter | None = None
        self._peeker: SqlitePeeker | None = None
        self._register: WriterRegister | None = None
        if self.is_sqlite:
            path = make_url(settings.database_url).database or ":memory:"
            if path != ":memory:":
                switch_to_wal(path, settings.sqlite_busy_timeout_ms)
                self._register = WriterRegister(path)  # before this process can write
            reads = sqlite_setup(settings.sqlite_read_busy_timeout_ms)
            self.engine = direct_engine(
                path,
                reads,
                self.stats,
                write=False,
                read_connections=settings.sqlite_read_connections,
            )
            writes = sqlite_setup(settings.sqlite_busy_timeout_ms)
            self._writer = SqliteWriter(
                lambda: direct_engine(path, writes, self.stats, write=True),
                direct_connector(path, writes),
                self.stats,
                batch=settings.db_write_batch_max,
                on_commit=self.caches.apply,
            )
            self._peeker = SqlitePeeker(path, reads)
        else:
            self.engine = create_async_engine(
                async_url(settings.database_url), json_serializer=json_without_nul
            )
            install_checkout_checks(self.engine, settings.db_ping_idle_seconds)
            self.stats.watch(self.engine)
            _install_postgresql_hooks(self.engine)
        self._maker = async_sessionmaker(self.engine, class_=AsyncSession, expire_on_commit=False)

    def _attach(self, db: AsyncSession) -> AsyncSession:
        caches.attach(db, self.caches)
        stats.attach(db, self.stats)
        return db

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A read-only unit of work. Writing in it is a bug: on SQLite it would take the
        write lock beside the writer thread."""
        # closing ends the transaction and keeps what was loaded readable
        try:
            async with self._maker() as session:
                yield self._attach(session)
        except Exception as exc:
            self._met(exc, "read")
            raise
        self.availability.read()

    async def read_unit(self, work: Work[T]) -> T:
        """Run the read `work(db)` in a read unit of work and return what it returned."""
        async with self.read() as db:
            return await work(db)

    async def peek(self, statement: Prepared, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of one small, indexed read statement, outside any unit of work: the
        probe a running job makes every step. On SQLite it runs at once on a connection
        of its own, without even a session (one statement is one WAL snapshot); on
        PostgreSQL in a read unit on the pool."""
        if self._peeker is not None:
            self.stats.statements += 1
            self.stats.transactions += 1
            try:
                rows = self._peeker.rows(statement.compiled(self.engine.dialect), params)
            except Exception as exc:
                self._met(exc, "read")
                raise
            self.availability.read()
            return rows
        async with self.read() as db:
            return (await statement.execute(db, params)).rows

    async def read_statements(self, work: Work[T]) -> T:
        """`read_unit` for a read of prepared statements only (`app.db.prepared`), in one
        snapshot: what a running job reads when the log moved under it (its task
        operations and its segment's items since, which must agree). On SQLite it runs on
        the peek's connection, in a transaction of SQLite's own, without a pool checkout
        or an ORM transaction (a query or a flush in it raises); on PostgreSQL it is a
        read unit at REPEATABLE READ (under READ COMMITTED each statement would see
        its own snapshot)."""
        if self._peeker is not None:
            self.stats.transactions += 1
            try:
                value = await self._peeker.unit(
                    lambda db: work(self._attach(db)), self.engine.dialect
                )
            except Exception as exc:
                self._met(exc, "read")
                raise
            self.availability.read()
            return value
        async with self.read() as db:
            await db.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            return await work(db)

    async def write(self, work: Work[T]) -> T:
        """Run `work(db)` as one write transaction and return what it returned.

        `work` must only talk to the database (no network, no waiting on other tasks),
        and must not call `write` itself: on SQLite it runs on the writer thread,
        holding the write lock, and would wait for itself."""
        return await self._write(work, statements=False)

    async def write_statements(self, work: Work[T]) -> T:
        """`write` for a unit of prepared statements (`app.db.prepared`): what a running
        job writes on every step, and its end. On SQLite it runs on the writer's direct
        connection without an ORM transaction (`SqliteWriter`); what the unit asks of the
        ORM runs there too, in the same transaction, checked out only when asked. On
        PostgreSQL it is an ordinary write unit on the pool."""
        return await self._write(work, statements=True)

    async def _write(self, work: Work[T], *, statements: bool) -> T:
        try:
            value = await self._run_write(work, statements=statements)
        except Exception as exc:
            self._met(exc, "write")
            raise
        self.availability.written()
        return value

    def _met(self, exc: Exception, what: str) -> None:
        """A unit of work raised `exc`: an outage when it is transient."""
        if is_transient(exc):
            self.availability.failed(exc, what)

    async def _run_write(self, work: Work[T], *, statements: bool) -> T:
        async def unit_of_work(db: AsyncSession) -> T:
            value = await work(self._attach(db))
            await deferred.flush(db)
            return value

        if self._writer is not None:
            return await self._writer.submit(unit_of_work, self._fire, statements=statements)
        # as on the writer thread, a caller that stops waiting does not cut the
        # transaction in the middle: it runs on in a task of its own
        unit = asyncio.ensure_future(self._write_on_pool(unit_of_work))
        unit.add_done_callback(_retrieve)
        return await asyncio.shield(unit)

    async def _write_on_pool(self, work: Work[T]) -> T:
        async with self._maker() as session:
            try:
                value = await work(session)
                await session.commit()
            except BaseException:
                await session.rollback()
                raise
        fired = signals.take(session)
        self.caches.apply(fired)
        self._fire(fired)
        return value

    def _fire(self, fired: list[signals.Signal]) -> None:
        if self.listener is None:
            return
        for signal in fired:
            try:
                self.listener(signal)
            except Exception:  # a signal is a hint; losing one costs a poll interval
                logger.exception("after-commit signal %r failed", signal)

    def alone_since_last_look(self) -> bool:
        """Whether nothing but this `Database` can have committed to the database since
        the previous call (`app.db.writers`): only ever on a SQLite file."""
        return self._register is not None and self._register.alone_since_last_look()

    async def dispose(self) -> None:
        if self._writer is not None:
            await self._writer.close()
        if self._register is not None:
            self._register.leave()
        if self._peeker is not None:
            self._peeker.close()
        await self.engine.dispose()
