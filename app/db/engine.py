"""The engine, the sessionmakers and the single commit point.

SQLite notes: every connection gets WAL, a busy timeout and foreign keys. The
driver's own transaction handling is switched off and `BEGIN` is issued by us, so
that writing units of work can start with `BEGIN IMMEDIATE`: a deferred
transaction that reads first and writes later can fail with SQLITE_BUSY without
waiting, which is exactly the race concurrent appends would hit.

PostgreSQL notes (psycopg 3, `postgresql+psycopg://`): pooled connections are
pinged before use, so a restarted server or a dropped idle connection costs a
reconnect instead of a failed request. Writers need no special BEGIN: row locks
(`FOR UPDATE`, `UPDATE … RETURNING`) serialise what must be serialised.
PostgreSQL cannot hold U+0000 in `text` or `jsonb` (SQLite can): on PostgreSQL it
is replaced by U+FFFD in every bound string and JSON value, so a NUL from a client
or from a tool's output never turns into a server error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from app.settings import Settings


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


def ensure_sqlite_dir(database_url: str) -> None:
    """Create the folder of a SQLite file so a fresh checkout needs no manual step."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def install_sqlite_hooks(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    """WAL, a busy timeout and foreign keys on every connection; `BEGIN IMMEDIATE` for
    engines marked `sqlite_immediate`, so writers queue at the start, never mid-way."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _without_nul(value: Any) -> Any:
    """`value` with U+0000 replaced by U+FFFD in every string, however deeply nested."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_nul(v) for v in value)
    return value


def _json_without_nul(value: Any) -> str:
    text = json.dumps(value)
    return json.dumps(_without_nul(value)) if "\\u0000" in text else text


def _install_postgresql_hooks(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "before_cursor_execute", retval=True)
    def _on_execute(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
    ) -> tuple[str, Any]:
        return statement, _without_nul(parameters)


class Database:
    """Owns the engine; hands out units of work that commit once, at the end."""

    def __init__(self, settings: Settings) -> None:
        ensure_sqlite_dir(settings.database_url)
        self.is_sqlite = is_sqlite(settings.database_url)
        options: dict[str, Any] = {}
        if not self.is_sqlite:
            options = {"pool_pre_ping": True, "json_serializer": _json_without_nul}
        self.engine = create_async_engine(async_url(settings.database_url), **options)
        if self.is_sqlite:
            install_sqlite_hooks(self.engine, settings.sqlite_busy_timeout_ms)
        else:
            _install_postgresql_hooks(self.engine)
        writer = self.engine.execution_options(sqlite_immediate=True)
        self._read = async_sessionmaker(self.engine, class_=AsyncSession, expire_on_commit=False)
        self._write = async_sessionmaker(writer, class_=AsyncSession, expire_on_commit=False)
        # SQLite has one writer at a time. Writers of this process queue here, in
        # order, instead of in SQLite's busy handler, which sleeps between retries
        # (up to 100 ms a time): with a few dozen concurrent turns those sleeps, not
        # the work, set the pace. Other processes still meet the busy timeout.
        self._write_turn: AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if self.is_sqlite else contextlib.nullcontext()
        )

    @asynccontextmanager
    async def session(self, *, write: bool) -> AsyncIterator[AsyncSession]:
        """One unit of work: commit if the block finishes, roll back if it raises.

        A write unit of work must not open another one inside it (on SQLite it
        would wait for itself)."""
        maker = self._write if write else self._read
        async with self._write_turn if write else contextlib.nullcontext(), maker() as session:
            try:
                yield session
                await session.commit()
            except BaseException:
                await session.rollback()
                raise

    async def dispose(self) -> None:
        await self.engine.dispose()
