"""A unit of work's durable events are inserted by one statement when its work ends
(`app.db.deferred`), and commit or vanish with it like its other writes.

An INSERT per event would make two for a REST task write and one per result for a tool
batch, each a round trip on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Event
from app.db.repositories.events import EventRepository
from app.services.events import record_event
from tests.support.databases import database_with

SESSION = "ses_events"


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


async def events(db: AsyncSession, count: int) -> None:
    for n in range(count):
        await record_event(db, SESSION, "item.appended", {"n": n})


async def five_events(db: AsyncSession) -> None:
    await events(db, 5)


async def statements_of(database: Database, unit: object) -> int:
    before = database.stats.snapshot()
    await unit  # type: ignore[misc]
    return database.stats.since(before).statements


async def stored(database: Database) -> list[int]:
    async with database.read() as db:
        rows = (await db.exec(select(Event).order_by(col(Event.id)))).all()
    return [row.data["n"] for row in rows]


async def test_a_units_events_are_inserted_by_one_statement_in_their_order(
    database: Database,
) -> None:
    one = await statements_of(database, database.write(lambda db: events(db, 1)))
    five = await statements_of(database, database.write(five_events))
    assert five == one
    assert await stored(database) == [0, 0, 1, 2, 3, 4]


async def test_many_events_go_in_chunks_of_fifty_in_their_order(database: Database) -> None:
    one = await statements_of(database, database.write(lambda db: events(db, 1)))
    many = await statements_of(database, database.write(lambda db: events(db, 120)))
    assert many == one + 2
    assert await stored(database) == [0, *range(120)]


async def test_a_statement_units_events_are_inserted_with_it(database: Database) -> None:
    await database.write_statements(five_events)
    assert await stored(database) == [0, 1, 2, 3, 4]


async def test_a_unit_that_fails_leaves_none_of_its_events(database: Database) -> None:
    async def fails(db: AsyncSession) -> None:
        await five_events(db)
        raise RuntimeError("the change is refused")

    with pytest.raises(RuntimeError):
        await database.write(fails)
    assert await stored(database) == []


async def test_units_queued_together_keep_their_own_events_and_a_failed_ones_go(
    database: Database,
) -> None:
    """Queued writes commit together on SQLite's writer, each in a savepoint: a unit's
    events are inserted inside its own, so one that fails takes only its events along."""

    async def unit(n: int) -> None:
        async def work(db: AsyncSession) -> None:
            await record_event(db, SESSION, "item.appended", {"n": n})
            if n % 3 == 0:
                raise RuntimeError("refused")

        await database.write(work)

    results = await asyncio.gather(*(unit(n) for n in range(12)), return_exceptions=True)
    assert [isinstance(r, RuntimeError) for r in results] == [n % 3 == 0 for n in range(12)]
    assert sorted(await stored(database)) == [n for n in range(12) if n % 3 != 0]


async def test_a_unit_reads_the_events_it_recorded(database: Database) -> None:
    async def write_then_read(db: AsyncSession) -> list[Event]:
        await five_events(db)
        return await EventRepository(db).after(
            session_id=SESSION, job_id=None, after_id=0, limit=10
        )

    assert [event.data["n"] for event in await database.write(write_then_read)] == [0, 1, 2, 3, 4]
