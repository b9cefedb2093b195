"""The hot path's statements, compiled once per dialect and run on the DBAPI connection.

Every agent step runs the same few statements (append an item and its event, count
the request, add usage, check the lease). Through SQLAlchemy's execution machinery
each costs ~0.1-0.2 ms of CPU (execution context, parameter and result processing)
for ~5 µs of SQLite's own work. A `Prepared` statement is a Core statement compiled
once per dialect (SQL text, parameter order, each parameter's bind processor), then
run as one DBAPI `execute` on the connection of the unit of work's own transaction:
it is part of that transaction like any other statement, commits and rolls back with
it, and sees what the unit wrote before it.

Parameters go through the column types' own bind processors (so a datetime is stored
exactly as the ORM stores it), and result columns through their result processors (a
datetime or a flag reads as the ORM reads it): rows come back as plain tuples.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ClauseElement
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.nul import without_nul
from app.db.sqlite_direct import DirectConnection
from app.db.stats import stats_of
from app.observability import tracing

Processor = Callable[[Any], Any] | None
DialectInsert = Callable[[Table], Any]
"""A dialect's own `insert` (its statement has `on_conflict_do_update`)."""
_DIALECT_INSERTS: dict[str, DialectInsert] = {
    "sqlite": sqlite_insert,
    "postgresql": postgresql_insert,
}
T = TypeVar("T")
_REQUIRED = object()


@dataclass(frozen=True)
class Outcome:
    """What a prepared statement returned: its rows (RETURNING or SELECT) and rowcount."""

    rows: list[tuple[Any, ...]]
    rowcount: int


@dataclass(frozen=True)
class CompiledStatement:
    sql: str
    names: tuple[str, ...]
    defaults: tuple[Any, ...]
    processors: tuple[Processor, ...]
    results: tuple[Processor, ...] | None  # None: no result column needs processing
    positional: bool
    sanitize: bool

    def parameters(self, params: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        values = []
        for name, default, process in zip(self.names, self.defaults, self.processors, strict=True):
            if default is _REQUIRED:
                if name not in params:
                    raise KeyError(f"the prepared statement needs the parameter {name!r}")
                value = params[name]
            else:
                value = params.get(name, default)
            if self.sanitize and isinstance(value, str):
                value = without_nul(value)
            values.append(value if process is None else process(value))
        if self.positional:
            return values
        return dict(zip(self.names, values, strict=True))

    def processed(self, outcome: Outcome) -> Outcome:
        results = self.results
        if results is None or not outcome.rows:
            return outcome
        rows = [
            tuple(
                value if process is None else process(value)
                for value, process in zip(row, results, strict=True)
            )
            for row in outcome.rows
        ]
        return Outcome(rows, outcome.rowcount)


def _default_of(bind: Any, column_default: Any) -> Any:
    """What a parameter the caller leaves out becomes: a column's scalar default, a
    literal's value; a callable column default is refused (pass the value)."""
    if column_default is not None:
        if not column_default.is_scalar:
            return _REQUIRED
        return column_default.arg
    if bind.required or bind.callable is not None:
        return _REQUIRED
    return bind.value


class Prepared:
    """A Core statement (no expanding `IN` lists) run with as little machinery as there is.

    A statement only a dialect's own construct can say (an upsert: SQLite's and
    PostgreSQL's `ON CONFLICT` clauses are different objects) is given as a function of
    the dialect's `insert`, called once per dialect. `column_keys` names the columns an
    insert without `.values()` sets."""

    def __init__(
        self,
        statement: ClauseElement | Callable[[DialectInsert], ClauseElement],
        *,
        column_keys: Sequence[str] = (),
    ) -> None:
        self.statement = statement
        self.column_keys = list(column_keys)
        self._by_dialect: dict[tuple[Any, ...], CompiledStatement] = {}

    def compiled(self, dialect: Dialect) -> CompiledStatement:
        # what the compiled form depends on, so that every engine of a kind shares one
        key = (type(dialect), dialect.paramstyle, getattr(dialect, "_json_serializer", None))
        found = self._by_dialect.get(key)
        if found is None:
            found = self._by_dialect[key] = self._compile(dialect)
        return found

    def _compile(self, dialect: Dialect) -> CompiledStatement:
        statement = self.statement
        if not isinstance(statement, ClauseElement):
            statement = statement(_DIALECT_INSERTS[dialect.name])
        compiled: Any = statement.compile(dialect=dialect, column_keys=self.column_keys or None)
        positional = bool(compiled.positional)
        names = tuple(compiled.positiontup if positional else compiled.binds)
        binds = [compiled.binds[name] for name in names]
        if any(bind.expanding for bind in binds):
            raise ValueError("a prepared statement cannot expand IN lists")
        # columns whose Python-side default (or onupdate) SQLAlchemy would compute
        prefetch = {
            column.key: column.default if column in compiled.insert_prefetch else column.onupdate
            for column in [*compiled.insert_prefetch, *compiled.update_prefetch]
        }
        results = tuple(
            entry.type.dialect_impl(dialect).result_processor(dialect, None)
            for entry in compiled._result_columns
        )
        return CompiledStatement(
            sql=compiled.string,
            names=names,
            defaults=tuple(_default_of(bind, prefetch.get(bind.key)) for bind in binds),
            processors=tuple(
                bind.type.dialect_impl(dialect).bind_processor(dialect) for bind in binds
            ),
            results=results if any(process is not None for process in results) else None,
            positional=positional,
            sanitize=dialect.name == "postgresql",
        )

    async def execute(self, db: AsyncSession, params: Mapping[str, Any]) -> Outcome:
        """Run in `db`'s transaction (begun here if it was not yet)."""
        driver, dialect = await _driver_of(db)
        compiled = self.compiled(dialect)
        stats = stats_of(db)
        if stats is not None:
            stats.statements += 1
        parameters = compiled.parameters(params)
        try:
            with tracing.sql_span(dialect.name, compiled.sql):
                outcome = await run_on(driver, compiled.sql, parameters)
        except Exception as exc:
            raise as_sqlalchemy_error(exc, compiled.sql, parameters) from exc
        return compiled.processed(outcome)


class Peeks(Protocol):
    """What runs one read statement outside any unit of work (`Database.peek`): the
    repositories' probes take it, so that their statements stay theirs."""

    async def peek(
        self, statement: Prepared, params: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]: ...


_DRIVER = "strata.prepared.driver"
_DIRECT = "strata.prepared.direct"


def statement_session(
    driver: Any, dialect: Dialect, orm: AsyncEngine | None = None
) -> AsyncSession:
    """The unit of work of a statement unit (`Database.write_statements`): an ORM session
    whose prepared statements run on `driver`, in the transaction its caller opened
    there. `orm` is an engine whose connection joins that same transaction
    (`app.db.sqlite_direct.JoinedConnection`): a query or a flush of the unit runs there,
    checked out only when the unit first asks. Without it anything but a prepared
    statement raises `UnboundExecutionError` instead of running outside that transaction."""
    db = AsyncSession(bind=orm, expire_on_commit=False)
    db.info[_DIRECT] = (driver, dialect)
    return db


async def _driver_of(db: AsyncSession) -> tuple[Any, Dialect]:
    """The driver connection of `db`'s transaction, and its dialect.

    Asking the session (`db.connection()`) goes through SQLAlchemy's greenlet bridge and
    its transaction bookkeeping: ~0.08 ms of CPU a statement, twenty times what SQLite
    spends on one of these. The answer cannot change while the session's transaction
    lasts, so it is kept in the session's `info` beside that transaction and asked again
    only in a new one (after a commit or a rollback)."""
    direct: tuple[Any, Dialect] | None = db.info.get(_DIRECT)
    if direct is not None:
        return direct
    transaction = db.sync_session.get_transaction()
    kept = db.info.get(_DRIVER)
    if transaction is not None and kept is not None and kept[0] is transaction:
        return kept[1], kept[2]
    connection = await db.connection()
    sync = connection.sync_connection
    assert sync is not None  # a connection handed out by the session is started
    driver = sync.connection.driver_connection
    db.info[_DRIVER] = (db.sync_session.get_transaction(), driver, connection.dialect)
    return driver, connection.dialect


def as_sqlalchemy_error(exc: Exception, sql: str, parameters: Any) -> Exception:
    """A driver's error as SQLAlchemy would have raised it (`OperationalError`,
    `IntegrityError`, …, the driver's error as `.orig`), so that callers catch one kind
    of error whichever way a statement ran. Errors that are not the driver's pass as
    they are."""
    if isinstance(exc, DBAPIError) or not _is_driver_error(exc):
        return exc
    wrapped = DBAPIError.instance(sql, parameters, exc, Exception, hide_parameters=True)
    return wrapped if isinstance(wrapped, Exception) else exc


def _is_driver_error(exc: Exception) -> bool:
    module = type(exc).__module__
    return module.startswith(("sqlite3", "psycopg"))


async def run_on(driver: Any, sql: str, parameters: Any) -> Outcome:
    """Execute on a driver connection: a direct `sqlite3` one at once, an async driver's
    (aiosqlite, psycopg) by awaiting it."""
    if isinstance(driver, DirectConnection):
        return run_sqlite(driver.raw, sql, parameters)
    cursor = await driver.execute(sql, parameters)
    try:
        rows = await cursor.fetchall() if cursor.description is not None else []
        return Outcome([tuple(row) for row in rows], cursor.rowcount)
    finally:
        await cursor.close()


def run_sqlite(connection: sqlite3.Connection, sql: str, parameters: Any) -> Outcome:
    cursor = connection.execute(sql, parameters)
    try:
        rows = cursor.fetchall() if cursor.description is not None else []
        return Outcome(rows, cursor.rowcount)
    finally:
        cursor.close()


class SqlitePeeker:
    """A connection for one-statement reads on the event loop's own thread.

    A statement outside a transaction is its own read transaction: one WAL snapshot,
    which a writer (of this or any other process) never blocks."""

    def __init__(self, path: str, setup: Callable[[sqlite3.Connection], None]) -> None:
        self._path = path
        self._setup = setup
        self._conn: sqlite3.Connection | None = None

    def rows(self, compiled: CompiledStatement, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        parameters = compiled.parameters(params)
        try:
            with tracing.sql_span("sqlite", compiled.sql):
                outcome = run_sqlite(self._connection(), compiled.sql, parameters)
        except Exception as exc:
            raise as_sqlalchemy_error(exc, compiled.sql, parameters) from exc
        return compiled.processed(outcome).rows

    async def unit(self, work: Callable[[AsyncSession], Awaitable[T]], dialect: Dialect) -> T:
        """`work` (prepared statements only) in one read transaction on this connection:
        one snapshot for all its statements, without a pool checkout or an ORM
        transaction. Its statements run at once (a direct connection never suspends), so
        nothing else uses the connection meanwhile."""
        connection = self._connection()
        connection.execute("BEGIN")
        try:
            return await work(statement_session(DirectConnection(connection), dialect))
        finally:
            connection.execute("ROLLBACK")  # it read only

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            connection = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            self._setup(connection)
            self._conn = connection
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
