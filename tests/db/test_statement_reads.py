"""Statement reads (`Database.read_statements`): what a running job reads when the log
moved under it, as prepared statements in one snapshot. On SQLite they run on the peek's
connection without a pool checkout or an ORM transaction; on PostgreSQL in a read unit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.exc import UnboundExecutionError
from sqlmodel import select as select_models
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.db.prepared import Prepared
from tests.support.databases import database_with

_S = Session.__table__  # type: ignore[attr-defined]
TITLE = Prepared(select(_S.c.title).where(_S.c.id == bindparam("s_id")))


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, "s1") as db:
        yield db


async def _retitle(database: Database, title: str) -> None:
    async def retitle(db: AsyncSession) -> None:
        session = await db.get(Session, "s1")
        assert session is not None
        session.title = title

    await database.write(retitle)


async def test_a_statement_reads_statements_see_one_snapshot(database: Database) -> None:
    """A write that commits between two of its statements is in neither (it awaits the
    write in between: on SQLite that write runs on the writer's own connection)."""
    await _retitle(database, "before")

    async def read_twice(db: AsyncSession) -> tuple[Any, Any]:
        first = (await TITLE.execute(db, {"s_id": "s1"})).rows
        await _retitle(database, "after")
        second = (await TITLE.execute(db, {"s_id": "s1"})).rows
        return first, second

    first, second = await database.read_statements(read_twice)

    assert first == second == [("before",)]
    assert await database.peek(TITLE, {"s_id": "s1"}) == [("after",)]


@pytest.mark.sqlite_only
async def test_a_query_in_a_statement_read_raises_instead_of_running_elsewhere(
    database: Database,
) -> None:
    async def query(db: AsyncSession) -> Any:
        return (await db.exec(select_models(Session))).all()

    with pytest.raises(UnboundExecutionError):
        await database.read_statements(query)


@pytest.mark.sqlite_only
async def test_a_statement_read_is_one_transaction_of_counted_statements(
    database: Database,
) -> None:
    before = (database.stats.transactions, database.stats.statements)

    async def read_twice(db: AsyncSession) -> None:
        await TITLE.execute(db, {"s_id": "s1"})
        await TITLE.execute(db, {"s_id": "s1"})

    await database.read_statements(read_twice)

    after = (database.stats.transactions, database.stats.statements)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 2)
