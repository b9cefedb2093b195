"""A `sqlite3` connection behind the async driver interface, without a thread.

SQLAlchemy's async engine expects an aiosqlite-like connection whose methods are
awaitables; aiosqlite runs each call on a thread of its own, which costs two thread
hand-offs per call (about ninety per agent step). These awaitables just call
`sqlite3` and return: a coroutine that never suspends finishes inside the `await`.
The writer thread (`app.db.writer`) runs whole transactions this way; the event
loop runs reads this way, which in WAL mode never wait for a writer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class DirectCursor:
    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> DirectCursor:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> DirectCursor:
        if parameters is None:
            self._cursor.execute(sql)
        else:
            self._cursor.execute(sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> DirectCursor:
        self._cursor.executemany(sql, parameters)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(size if size is not None else self._cursor.arraysize)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    async def nextset(self) -> None:
        return None

    async def setinputsizes(self, *_sizes: Any) -> None:
        return None


class DirectConnection:
    """What SQLAlchemy's aiosqlite adapter calls on a driver connection."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection
        # the adapter checks `_connection` (aiosqlite's name) before commit and rollback
        self._connection: sqlite3.Connection | None = connection

    @property
    def raw(self) -> sqlite3.Connection:
        """The `sqlite3` connection itself, for statements run past SQLAlchemy."""
        return self._conn

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    def cursor(self) -> DirectCursor:
        return DirectCursor(self._conn.cursor())

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> DirectCursor:
        return await self.cursor().execute(sql, parameters)

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    async def commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        self._conn.close()
        self._connection = None

    def stop(self) -> None:
        self._conn.close()
        self._connection = None


class JoinedConnection(DirectConnection):
    """A direct connection's `sqlite3` connection, for an ORM session that joins the
    transaction its owner (the writer) opened there: committing, rolling back and closing
    it are the owner's, so here they do nothing."""

    async def commit(self) -> None:
        return None

    async def rollback(self) -> None:
        return None

    async def close(self) -> None:
        self._connection = None

    def stop(self) -> None:
        self._connection = None


def direct_connector(path: str, setup: Callable[[sqlite3.Connection], None]) -> Callable[[], Any]:
    """An `async_creator` for `create_async_engine`: a new direct connection to `path`.

    `check_same_thread` is off because the connection is made on the thread that asks
    for it and then only ever used there; `setup` runs the pragmas."""

    async def connect() -> DirectConnection:
        connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        setup(connection)
        return DirectConnection(connection)

    return connect
