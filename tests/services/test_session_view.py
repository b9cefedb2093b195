"""A session's view of its log is valid while the log still ends at its `last_seq`: a
reader that finds the log moved reads only what came after it; a new segment (a
compaction) is read whole and the view's request messages start over; a deleted
session's view is forgotten; a view whose state may be off is read again from the log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

import app.services.session_view as session_view
from app.db.caches import SESSION_VIEWS
from app.db.engine import Database
from app.db.repositories.sessions import SessionRepository, session_of
from app.domain.items import Origin, TaskEvent, user_text
from app.engine.requests import to_messages
from app.services.items import append_item
from app.services.session_deletion import delete_session
from app.services.session_view import SessionView, give_back, take_view
from app.services.tasks import change_task
from app.settings import Settings
from tests.support.databases import database_with

SESSION = "ses_view"


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


@pytest.fixture
def tails(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The `after_seq` of every segment read a view makes."""
    read_after: list[int] = []
    real = session_view.segment_tail  # type: ignore[attr-defined]

    async def recorded(
        db: Any, session_id: str, segment: int, after_seq: int, lineage: Any = None
    ) -> Any:
        read_after.append(after_seq)
        return await real(db, session_id, segment, after_seq, lineage)

    monkeypatch.setattr(session_view, "segment_tail", recorded)
    return read_after


async def append(database: Database, *texts: str) -> None:
    """Items appended by another writer (another process, say) than the view's owner."""

    async def work(db: AsyncSession) -> None:
        for text in texts:
            await append_item(db, SESSION, user_text(text), Origin.user)

    await database.write(work)


async def read_up(database: Database, view: SessionView) -> None:
    """What a reader does: learn where the log ends, and catch the view up to there."""

    async def work(db: AsyncSession) -> None:
        row = session_of(await SessionRepository(db).session_row(SESSION))
        assert row is not None
        if not view.valid_at(row.last_seq) or view.segment != row.current_segment:
            await view.catch_up(db, row.current_segment, row.last_seq)

    await database.read_statements(work)


def texts(view: SessionView) -> list[str]:
    return [item.content[0].text for item in view.items]  # type: ignore[union-attr]


async def test_after_another_writers_append_a_view_reads_only_the_items_after_its_end(
    database: Database, tails: list[int]
) -> None:
    view = SessionView(SESSION)
    await append(database, "one", "two")
    await read_up(database, view)

    await append(database, "three")
    await read_up(database, view)

    assert tails == [0, 2]
    assert (texts(view), view.last_seq) == (["one", "two", "three"], 3)


async def test_a_view_whose_log_ends_where_it_does_reads_nothing(
    database: Database, tails: list[int]
) -> None:
    view = SessionView(SESSION)
    await append(database, "one")
    await read_up(database, view)

    await read_up(database, view)

    assert tails == [0]


async def test_after_a_compaction_a_view_holds_the_new_segment_only(
    database: Database, tails: list[int]
) -> None:
    view = SessionView(SESSION)
    await append(database, "old")
    await read_up(database, view)

    async def compact(db: AsyncSession) -> None:
        await SessionRepository(db).start_segment(SESSION)
        await append_item(db, SESSION, user_text("summary"), Origin.system)

    await database.write(compact)
    await read_up(database, view)

    assert texts(view) == ["summary"]
    assert tails == [0, 0]


async def test_after_a_compaction_a_views_request_messages_start_over(
    database: Database,
) -> None:
    view = SessionView(SESSION)
    await append(database, "old")
    await read_up(database, view)
    conversation = view.conversation(tools_offered=True)
    conversation.messages(view.items)

    async def compact(db: AsyncSession) -> None:
        await SessionRepository(db).start_segment(SESSION)
        await append_item(db, SESSION, user_text("summary"), Origin.system)
        await append_item(db, SESSION, user_text("next"), Origin.user)

    await database.write(compact)
    await read_up(database, view)

    assert conversation.messages(view.items) == to_messages(view.items)


async def test_a_view_that_missed_an_append_reads_its_segment_again(
    database: Database, tails: list[int]
) -> None:
    """Its owner's write landed after someone else's: what it holds may be off."""
    view = SessionView(SESSION)
    await append(database, "one")
    await read_up(database, view)
    await append(database, "two", "three")

    view.appended(3, user_text("three"))  # seq 2 never reached it
    await read_up(database, view)

    assert tails == [0, 0]
    assert texts(view) == ["one", "two", "three"]


async def test_a_rest_task_write_lands_in_the_view_the_sessions_turns_read(
    database: Database, tails: list[int]
) -> None:
    view = SessionView(SESSION)
    await append(database, "plan")
    await read_up(database, view)
    give_back(database.caches, view)

    await database.write(
        lambda db: change_task(
            db, "t", SESSION, "TaskCreate", {"subject": "by REST"}, checkpoint_every=1000
        )
    )
    kept = take_view(database.caches, SESSION)
    await read_up(database, kept)

    assert kept is view and kept.last_seq == 2
    assert isinstance(kept.items[-1], TaskEvent)
    assert [t.subject for t in kept.tasks.all()] == ["by REST"]
    assert tails == [0]  # the write read nothing, nor does the next reader


async def test_a_deleted_sessions_view_is_forgotten(database: Database) -> None:
    view = SessionView(SESSION)
    await append(database, "one")
    await read_up(database, view)
    give_back(database.caches, view)

    await database.write(lambda db: delete_session(db, "t", SESSION))

    assert len(database.caches[SESSION_VIEWS]) == 0


async def test_the_holder_is_bounded_by_the_job_session_cache_settings(
    database_url: str,
) -> None:
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        job_session_cache_seconds=7.0,
        job_session_cache_entries=3,
        job_session_cache_items=11,
    )
    database = Database(settings)
    try:
        held = database.caches[SESSION_VIEWS]
        assert (held.ttl, held.max_entries, held.max_weight) == (7.0, 3, 11)
    finally:
        await database.dispose()
