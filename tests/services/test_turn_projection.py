"""A turn's L2 row as its end writes it (`project_turns`), by prepared statements: a new
turn gets its row with `ended_second`, a turn whose text changed gets it replaced and its
L1 dropped, and one projected again unchanged keeps its row and L1 as they were.

No ORM read and insert (whose mapper event would set `ended_second`) at any turn's end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import MemoryDetail, MemoryTurn
from app.db.repositories.memory import MemoryRepository
from app.domain.items import (
    AssistantMessage,
    ItemPayload,
    Origin,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    user_text,
)
from app.memory.timeref import second_of_day
from app.services.items import append_item
from app.services.memory import project_turns
from app.settings import Settings
from tests.support.databases import database_with

SESSION = "ses_projected"
AT = datetime(2026, 12, 5, 8, 30, 15, 250_000, tzinfo=UTC)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


async def say(database: Database, question: str, answer: str, at: datetime) -> None:
    async def write(db: AsyncSession) -> None:
        await append_item(db, SESSION, user_text(question), Origin.user, at=at)
        reply = AssistantMessage(content=[TextBlock(text=answer)])
        await append_item(db, SESSION, reply, Origin.system, at=at + timedelta(seconds=2))

    await database.write(write)


async def project(database: Database) -> int:
    return await database.write(lambda db: project_turns(db, SESSION, [1]))


async def turns(database: Database) -> list[MemoryTurn]:
    async with database.read() as db:
        query = select(MemoryTurn).where(col(MemoryTurn.session_id) == SESSION)
        return list((await db.exec(query)).all())


async def test_a_new_turn_gets_its_row_with_the_second_of_its_end(database: Database) -> None:
    await say(database, "Which release?", "The December one.", AT)

    assert await project(database) == 1

    [row] = await turns(database)
    ended = AT + timedelta(seconds=2)
    assert (row.turn, row.origin_session_id, row.user_text, row.assistant_text) == (
        1,
        SESSION,
        "Which release?",
        "The December one.",
    )
    assert (row.ended_at, row.ended_second, row.l1) == (ended, second_of_day(ended), None)


async def test_a_new_turn_is_stored_by_the_statement_after_the_read_of_its_items(
    database: Database,
) -> None:
    """Its row is written, or the row it has changed, or kept, by one upsert, with no read
    of the turn's row first."""
    await say(database, "Which release?", "The December one.", AT)

    async def nothing(db: AsyncSession) -> None:
        return None

    before = database.stats.snapshot()
    await database.write_statements(nothing)  # a unit's own (SQLite: its BEGIN)
    own = database.stats.since(before).statements
    before = database.stats.snapshot()
    await database.write_statements(lambda db: project_turns(db, SESSION, [1]))

    assert database.stats.since(before).statements - own == 2  # the turn's items, its row
    assert len(await turns(database)) == 1


async def test_a_turn_projected_again_unchanged_keeps_its_row_and_l1(database: Database) -> None:
    await say(database, "Which release?", "The December one.", AT)
    await project(database)
    [row] = await turns(database)
    assert row.id is not None
    turn_id = row.id
    await database.write(lambda db: MemoryRepository(db).set_l1(turn_id, "asked", fallback=False))

    assert await project(database) == 0

    [again] = await turns(database)
    assert (again.id, again.l1, again.user_text) == (row.id, "asked", row.user_text)


async def test_a_turn_whose_text_changed_is_replaced_and_its_l1_dropped(
    database: Database,
) -> None:
    await say(database, "Which release?", "The December one.", AT)
    await project(database)
    [row] = await turns(database)
    assert row.id is not None
    turn_id = row.id
    await database.write(lambda db: MemoryRepository(db).set_l1(turn_id, "asked", fallback=True))
    later = AT + timedelta(minutes=1)
    reply = AssistantMessage(content=[TextBlock(text="And the notes are out.")])
    await database.write(
        lambda db: append_item(db, SESSION, reply, Origin.system, turn=1, at=later)
    )

    assert await project(database) == 1

    [again] = await turns(database)
    assert again.id == row.id
    assert again.assistant_text.endswith("And the notes are out.")
    assert (again.ended_at, again.ended_second) == (later, second_of_day(later))
    assert (again.l1, again.l1_fallback) == (None, False)


async def test_a_turn_with_tool_calls_is_projected_by_prepared_statements_and_its_l3_kept_once(
    database: Database,
) -> None:
    """A turn's L3 rows are looked up and inserted by prepared statements, so the end of a
    turn that called a tool stays a statement unit. Projected again, the turn adds no L3
    row twice."""
    call = ToolUseBlock(id="toolu_clock", name="current_time", input={})
    said: list[ItemPayload] = [
        user_text("What time is it?"),
        AssistantMessage(content=[call]),
        ToolResult(tool_use_id=call.id, content="08:30 UTC", name=call.name),
        AssistantMessage(content=[TextBlock(text="Half past eight.")]),
    ]

    async def write(db: AsyncSession) -> None:
        for n, payload in enumerate(said):
            origin = Origin.user if n == 0 else Origin.system
            await append_item(db, SESSION, payload, origin, at=AT + timedelta(seconds=n))

    await database.write(write)

    assert await database.write_statements(lambda db: project_turns(db, SESSION, [1])) == 1
    await database.write_statements(lambda db: project_turns(db, SESSION, [1]))

    async with database.read() as db:
        details = (await db.exec(select(MemoryDetail.source_id))).all()
    assert sorted(details) == sorted(set(details)) and len(details) >= 2


@pytest.mark.postgresql_only
async def test_two_projections_of_one_turn_at_once_both_commit(
    database: Database, database_url: str
) -> None:
    """Two processes end the same turn at once (a turn resumed elsewhere, an import):
    the second one's upsert waits for the first one's uncommitted row and then keeps it
    (a read before an insert would find nothing, and the insert break the unique key)."""
    await say(database, "Which release?", "The December one.", AT)
    inserted, release = asyncio.Event(), asyncio.Event()

    async def first(db: AsyncSession) -> int:
        changed = await project_turns(db, SESSION, [1])
        inserted.set()
        await release.wait()  # the row stays uncommitted meanwhile
        return changed

    other = Database(Settings(_env_file=None, database_url=database_url))  # another process's
    try:
        ending = asyncio.create_task(database.write(first))
        await inserted.wait()
        second = asyncio.create_task(project(other))
        await asyncio.sleep(0.3)
        waited = not second.done()
        release.set()
        changed = await asyncio.gather(ending, second)
    finally:
        await other.dispose()

    assert waited  # on the first one's row
    assert list(changed) == [1, 0]
    assert len(await turns(database)) == 1
