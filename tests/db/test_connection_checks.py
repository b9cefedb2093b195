"""PostgreSQL's pooled connections are checked before use: a connection the server closed
is replaced without failing the request (its socket says so), and a ping, one round trip,
is spent only on a connection idle for `STRATA_DB_PING_IDLE_SECONDS`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

import app.db.engine as engine_module
from app.db.engine import Database
from app.services.live_bridge import libpq_url

pytestmark = pytest.mark.postgresql_only


@pytest.fixture
def make_database(make_settings: Any) -> Callable[[float], Database]:
    made: list[Database] = []

    def make(idle_seconds: float) -> Database:
        database = Database(make_settings(db_ping_idle_seconds=idle_seconds))
        made.append(database)
        return database

    return make


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    seen: list[object] = []
    real = engine_module.ping

    def counted(dbapi_connection: Any) -> None:
        seen.append(dbapi_connection)
        real(dbapi_connection)

    monkeypatch.setattr(engine_module, "ping", counted)
    return seen


async def backend_pid(database: Database) -> int:
    async with database.read() as db:
        return int((await db.exec(text("SELECT pg_backend_pid()"))).one()[0])  # type: ignore[call-overload]


async def terminate(database: Database, pid: int) -> None:
    """From a connection of its own: the pool's would be the one it ends. Returns once the
    backend is gone: `pg_terminate_backend` only signals it, and the backend sends its
    last error to the client before it leaves `pg_stat_activity`, so the connection is
    then closed as far as its socket can tell."""
    import psycopg

    url = libpq_url(database.engine.url.render_as_string(hide_password=False))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connection.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(500):
            found = await connection.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
            if await found.fetchone() is None:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"backend {pid} still running 5 s after it was terminated")


@pytest.mark.parametrize("idle_seconds", [0.0, 60.0], ids=["pinged", "not-pinged"])
async def test_a_connection_the_server_closed_is_replaced_before_use(
    make_database: Callable[[float], Database], idle_seconds: float
) -> None:
    database = make_database(idle_seconds)
    try:
        dropped = await backend_pid(database)
        await terminate(database, dropped)

        assert await backend_pid(database) != dropped  # no error: a new connection
    finally:
        await database.dispose()


async def test_a_connection_used_a_moment_ago_is_not_pinged(
    make_database: Callable[[float], Database], pings: list[object]
) -> None:
    database = make_database(60.0)
    try:
        for _ in range(5):
            await backend_pid(database)
    finally:
        await database.dispose()

    assert pings == []


async def test_a_connection_idle_past_the_threshold_is_pinged(
    make_database: Callable[[float], Database], pings: list[object]
) -> None:
    database = make_database(0.0)
    try:
        await backend_pid(database)
        await backend_pid(database)
    finally:
        await database.dispose()

    assert len(pings) == 2
