"""The end-of-turn summary check counts instead of loading the chain's turns.

`pending_count` (one count query) must agree with what loading every turn of the chain
would find: the turns older than the newest `window`, those without L1.
`pending_turns`, which the summarize job works off, must be exactly those turns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import MemoryTurn, Session
from app.services.sessions import create_session
from app.services.summaries import enqueue_if_needed, pending_count, pending_turns

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WINDOW = 4


@pytest.fixture
async def database(make_settings: Any) -> AsyncIterator[Database]:
    database = Database(make_settings())
    yield database
    await database.dispose()


async def chain(
    database: Database, turns: int, summarized: set[int], *, lone: bool = False
) -> Session:
    """A session continuing another; `turns` turns, oldest first, split between the two
    (turn 2 and 3 end at the same second, so the id breaks the tie); the turns numbered in
    `summarized` have an L1 already. A `lone` session continues none and has them all
    (its check is one prepared statement)."""

    async def build(db: AsyncSession) -> Session:
        first = await create_session(db, "acme")
        second = await create_session(db, "acme", continues_from=None if lone else first.id)
        for n in range(turns):
            owner = first if n < turns // 2 and not lone else second
            db.add(
                MemoryTurn(
                    session_id=owner.id,
                    origin_session_id=owner.id,
                    turn=n + 1,
                    ended_at=T0 + timedelta(seconds=n if n != 3 else 2),
                    user_text=f"question {n}",
                    l1=f"summary {n}" if n in summarized else None,
                )
            )
        await db.flush()
        return second

    return await database.write(build)


async def loaded_the_old_way(db: AsyncSession, session: Session, window: int) -> list[int]:
    """The reference the count agrees with: every turn of the chain, filtered in Python."""
    owners = [session.id, str(session.continues_from)]
    query = (
        select(MemoryTurn)
        .where(col(MemoryTurn.session_id).in_(owners))
        .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
    )
    turns = list((await db.exec(query)).all())
    if len(turns) <= window:
        return []
    return [t.turn for t in turns[: len(turns) - window] if t.l1 is None]


@pytest.mark.parametrize(
    ("turns", "summarized", "expected"),
    [
        (0, set(), 0),
        (WINDOW - 1, set(), 0),
        (WINDOW, set(), 0),
        (WINDOW + 1, set(), 1),
        (WINDOW + 5, set(), 5),
        (WINDOW + 5, {0, 2}, 3),
        (WINDOW + 5, {0, 1, 2, 3, 4}, 0),
        (WINDOW + 5, {6, 7, 8}, 5),  # summaries inside the window change nothing
        (WINDOW + 5, {1, 7}, 4),
    ],
    ids=[
        "empty",
        "below-the-window",
        "at-the-window",
        "one-above",
        "five-above",
        "some-older-summarized",
        "all-older-summarized",
        "only-newest-summarized",
        "mixed",
    ],
)
@pytest.mark.parametrize("lone", [False, True], ids=["chain", "lone-session"])
async def test_the_count_agrees_with_loading_every_turn(
    database: Database, turns: int, summarized: set[int], expected: int, lone: bool
) -> None:
    session = await chain(database, turns, summarized, lone=lone)

    async with database.read() as db:
        old = await loaded_the_old_way(db, session, WINDOW)
        count = await pending_count(db, session, WINDOW)
        pending = [t.turn for t in await pending_turns(db, session, WINDOW)]

    assert len(old) == expected
    assert count == expected
    assert pending == old


@pytest.mark.parametrize("lone", [False, True], ids=["chain", "lone-session"])
@pytest.mark.parametrize("window", [0, 1, 3, 20])
async def test_any_window_agrees_with_loading_every_turn(
    database: Database, window: int, lone: bool
) -> None:
    session = await chain(database, 9, {1, 5}, lone=lone)

    async with database.read() as db:
        old = await loaded_the_old_way(db, session, window)
        count = await pending_count(db, session, window)
        pending = [t.turn for t in await pending_turns(db, session, window)]

    assert (count, pending) == (len(old), old)


@pytest.mark.parametrize(("turns", "enqueued"), [(WINDOW, False), (WINDOW + 1, True)])
async def test_a_summarize_job_is_enqueued_only_past_the_window(
    database: Database, turns: int, enqueued: bool
) -> None:
    session = await chain(database, turns, set())

    job = await database.write(lambda db: enqueue_if_needed(db, session, WINDOW))

    assert (job is not None) == enqueued
    assert job is None or (job.kind, job.lane) == ("summary", "background")


async def test_a_lone_sessions_count_takes_in_a_session_merged_into_it(database: Database) -> None:
    """The merged session's turns may not all have moved yet: they count as the target's
    own (the count for a session alone looks for such a merge in the same statement)."""

    async def build(db: AsyncSession) -> Session:
        target = await create_session(db, "acme")
        source = await create_session(db, "acme")
        source.merged_into = target.id
        db.add(source)
        for n in range(WINDOW + 3):  # the three oldest are still the source's
            owner = source if n < 3 else target
            db.add(
                MemoryTurn(
                    session_id=owner.id,
                    origin_session_id=owner.id,
                    turn=n + 1,
                    ended_at=T0 + timedelta(seconds=n),
                    user_text=f"question {n}",
                )
            )
        await db.flush()
        return target

    target = await database.write(build)

    async with database.read() as db:
        count = await pending_count(db, target, WINDOW)
        pending = await pending_turns(db, target, WINDOW)

    assert count == len(pending) == 3
