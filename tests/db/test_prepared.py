"""Prepared statements (the hot path's SQL, run on the DBAPI connection) behave as the
same statements through SQLAlchemy would: inside the unit's transaction, with the
column types' conversions, and with SQLAlchemy's errors. And `Database.peek`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, exists, insert, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.db.prepared import Prepared
from app.domain.errors import Conflict

_S = Session.__table__  # type: ignore[attr-defined]
ADD = Prepared(
    insert(_S),
    column_keys=("id", "tenant", "title", "metadata", "created_at", "updated_at"),
)
TITLE = Prepared(select(_S.c.title).where(_S.c.id == bindparam("s_id")))
STAMP = datetime(2026, 12, 3, 7, 0, 1, 250000, tzinfo=UTC)


@pytest.fixture
async def database(make_settings: Any) -> AsyncIterator[Database]:
    db = Database(make_settings())
    yield db
    await db.dispose()


def add(session_id: str, title: str = "t") -> dict[str, Any]:
    return {
        "id": session_id,
        "tenant": "acme",
        "title": title,
        "metadata": {},
        "created_at": STAMP,
        "updated_at": STAMP,
    }


async def test_a_prepared_statement_sees_what_its_unit_wrote_before_it(database: Database) -> None:
    async def work(db: AsyncSession) -> list[tuple[Any, ...]]:
        db.add(Session(id="ses_orm", tenant="acme", title="by the ORM"))
        await db.flush()
        return (await TITLE.execute(db, {"s_id": "ses_orm"})).rows

    assert await database.write(work) == [("by the ORM",)]


async def test_a_prepared_write_rolls_back_with_its_unit(database: Database) -> None:
    async def work(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_gone"))
        raise Conflict("changed my mind")

    with pytest.raises(Conflict):
        await database.write(work)

    assert await database.peek(TITLE, {"s_id": "ses_gone"}) == []


async def test_parameters_go_through_the_column_types_as_the_orm_stores_them(
    database: Database,
) -> None:
    async def work(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_prepared"))

    await database.write(work)

    async with database.read() as db:
        row = await db.get(Session, "ses_prepared")
    assert row is not None and row.created_at == STAMP


async def test_result_columns_read_as_the_orm_reads_them(database: Database) -> None:
    """A datetime comes back aware (SQLite stores text) and a flag as a bool (SQLite
    stores 0/1), whether the statement runs in a unit or as a peek."""
    read = Prepared(
        select(_S.c.created_at, exists().where(_S.c.id == bindparam("s_id"))).where(
            _S.c.id == bindparam("s_id")
        )
    )

    async def work(db: AsyncSession) -> list[tuple[Any, ...]]:
        await ADD.execute(db, add("ses_read"))
        return (await read.execute(db, {"s_id": "ses_read"})).rows

    in_unit = await database.write(work)
    peeked = await database.peek(read, {"s_id": "ses_read"})

    assert in_unit == peeked == [(STAMP, True)]
    assert type(in_unit[0][1]) is bool


async def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(database: Database) -> None:
    async def twice(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_twice"))
        await ADD.execute(db, add("ses_twice"))

    with pytest.raises(IntegrityError):
        await database.write(twice)


async def test_a_peek_reads_what_was_committed_without_a_unit_of_work(database: Database) -> None:
    async def work(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_peeked", "seen"))

    await database.write(work)

    assert await database.peek(TITLE, {"s_id": "ses_peeked"}) == [("seen",)]


@pytest.mark.postgresql_only
async def test_on_postgresql_a_nul_in_a_string_parameter_is_stored_as_a_replacement(
    database: Database,
) -> None:
    async def work(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_nul", "a\x00b"))

    await database.write(work)

    assert await database.peek(TITLE, {"s_id": "ses_nul"}) == [("a\ufffdb",)]


def test_a_statement_with_an_expanding_list_is_refused() -> None:
    statement = Prepared(select(_S.c.id).where(_S.c.id.in_(bindparam("ids", expanding=True))))

    with pytest.raises(ValueError, match="IN lists"):
        statement.compiled(sqlite.dialect())


async def test_a_column_left_out_takes_its_scalar_default(database: Database) -> None:
    async def work(db: AsyncSession) -> None:
        await ADD.execute(db, add("ses_defaults"))

    await database.write(work)

    async with database.read() as db:
        row = await db.get(Session, "ses_defaults")
    assert row is not None and (row.last_seq, row.current_turn) == (0, 0)


async def test_after_a_commit_a_prepared_statement_runs_in_the_sessions_next_transaction(
    database: Database,
) -> None:
    """The driver connection is kept per transaction: a statement after the session's
    commit must begin (and roll back with) the next one, not run outside any."""
    async with database.read() as db:
        await TITLE.execute(db, {"s_id": "ses_none"})
        await db.commit()
        await ADD.execute(db, add("ses_undone"))
        await db.rollback()

    async with database.read() as db:
        assert (await TITLE.execute(db, {"s_id": "ses_undone"})).rows == []
