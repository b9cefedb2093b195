"""Rows read by one prepared statement become the models the rest of the code knows,
detached and clean, as the ORM's loading would have made them (`app.db.rows`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import inspect
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.db.repositories.sessions import SESSION_ROW, SessionRepository
from app.domain.errors import NotFound
from app.services.sessions import session_from
from tests.support.databases import database_with


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url) as db:

        async def add(session: AsyncSession) -> None:
            session.add(
                Session(
                    id="s1",
                    tenant="t",
                    metadata_={"project": "strata"},
                    tools=["TaskList"],
                    system_prompt="Be brief.",
                )
            )

        await db.write(add)
        yield db


async def test_a_session_read_by_its_row_is_the_session_the_orm_loads(
    database: Database,
) -> None:
    rows = await database.peek(SESSION_ROW, {"s_id": "s1"})
    async with database.read() as db:
        loaded = await SessionRepository(db).get("t", "s1")

    read = session_from(rows, "t", "s1")

    assert loaded is not None
    assert read.model_dump() == loaded.model_dump()
    assert read.metadata_ == {"project": "strata"}


async def test_a_row_read_so_is_detached_and_clean(database: Database) -> None:
    read = session_from(await database.peek(SESSION_ROW, {"s_id": "s1"}), "t", "s1")

    state = inspect(read)
    assert (state.detached, state.modified) == (True, False)


async def test_another_tenants_or_a_missing_session_is_not_found(database: Database) -> None:
    rows = await database.peek(SESSION_ROW, {"s_id": "s1"})

    with pytest.raises(NotFound):
        session_from(rows, "other", "s1")
    with pytest.raises(NotFound):
        session_from(await database.peek(SESSION_ROW, {"s_id": "nope"}), "t", "nope")
