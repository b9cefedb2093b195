"""Statement units (`Database.write_statements`): the writes a running job makes on every
step, prepared statements on the hot path. On SQLite they run on the writer's direct
connection, and what a unit asks of the ORM runs on a connection joined to its
transaction; callers see what `Database.write` would tell them, on both backends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import select as select_models
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import signals
from app.db.engine import Database
from app.db.models import Session
from app.db.prepared import Prepared
from app.domain.errors import Conflict
from tests.db.test_writer import add_session

_S = Session.__table__  # type: ignore[attr-defined]
ADD = Prepared(
    insert(_S),
    column_keys=("id", "tenant", "title", "metadata", "created_at", "updated_at"),
)
TITLE = Prepared(select(_S.c.title).where(_S.c.id == bindparam("s_id")))
STAMP = datetime(2026, 12, 4, 7, 0, 1, tzinfo=UTC)


@pytest.fixture
async def database(make_settings: Any) -> AsyncIterator[Database]:
    db = Database(make_settings(sqlite_busy_timeout_ms=1))
    yield db
    await db.dispose()


def _row(session_id: str) -> dict[str, Any]:
    return {
        "id": session_id,
        "tenant": "acme",
        "title": session_id,
        "metadata": {},
        "created_at": STAMP,
        "updated_at": STAMP,
    }


def adding(session_id: str, *, fail: bool = False, signal: signals.Signal | None = None) -> Any:
    async def work(db: AsyncSession) -> str:
        await ADD.execute(db, _row(session_id))
        if signal is not None:
            signals.emit(db, signal)
        if fail:
            raise Conflict(f"{session_id} refused")
        return session_id

    return work


async def stored(database: Database, session_id: str) -> bool:
    return bool(await database.peek(TITLE, {"s_id": session_id}))


async def test_a_statement_unit_commits_what_its_statements_wrote(database: Database) -> None:
    assert await database.write_statements(adding("ses_1")) == "ses_1"

    assert await stored(database, "ses_1")


async def test_a_statement_unit_that_fails_writes_nothing(database: Database) -> None:
    with pytest.raises(Conflict):
        await database.write_statements(adding("ses_gone", fail=True))

    assert not await stored(database, "ses_gone")
    assert await database.write_statements(adding("ses_next")) == "ses_next"


async def test_a_driver_error_in_a_statement_unit_is_raised_as_sqlalchemy_raises_it(
    database: Database,
) -> None:
    await database.write_statements(adding("ses_twice"))

    with pytest.raises(IntegrityError):
        await database.write_statements(adding("ses_twice"))


async def test_a_statement_units_query_runs_in_its_transaction(database: Database) -> None:
    """The ORM part of a statement unit sees what its statements wrote before it."""

    async def reads_back(db: AsyncSession) -> list[str]:
        await ADD.execute(db, _row("ses_seen"))
        return list((await db.exec(select_models(Session.id))).all())

    assert await database.write_statements(reads_back) == ["ses_seen"]


async def test_a_statement_unit_that_fails_after_its_query_writes_nothing(
    database: Database,
) -> None:
    async def fails(db: AsyncSession) -> None:
        await ADD.execute(db, _row("ses_half"))
        await db.exec(select_models(Session))
        raise Conflict("refused")

    with pytest.raises(Conflict):
        await database.write_statements(fails)

    assert not await stored(database, "ses_half")
    assert await database.write_statements(adding("ses_after")) == "ses_after"


async def test_statement_units_queued_with_orm_units_fail_alone(database: Database) -> None:
    units = [
        database.write_statements(adding(f"ses_{n}", fail=n % 3 == 0))
        if n % 2
        else database.write(add_session(f"ses_{n}"))
        for n in range(12)
    ]
    results = await asyncio.gather(*units, return_exceptions=True)

    refused = {n for n in range(12) if n % 2 and n % 3 == 0}
    assert [n for n, r in enumerate(results) if isinstance(r, Conflict)] == sorted(refused)
    for n in range(12):
        assert await stored(database, f"ses_{n}") == (n not in refused)


async def test_statement_units_queued_together_fail_alone(database: Database) -> None:
    units = [database.write_statements(adding(f"ses_{n}", fail=n % 3 == 0)) for n in range(12)]
    results = await asyncio.gather(*units, return_exceptions=True)

    assert [n for n, r in enumerate(results) if isinstance(r, Conflict)] == [0, 3, 6, 9]
    for n in range(12):
        assert await stored(database, f"ses_{n}") == bool(n % 3)


@pytest.mark.sqlite_only
async def test_statement_units_queued_with_orm_units_commit_with_them(database: Database) -> None:
    """A batch that mixes both kinds runs on the ORM's connection, statement units in
    savepoints there: still one transaction for the lot."""
    before = database.stats.snapshot()
    await asyncio.gather(
        *(
            database.write_statements(adding(f"ses_{n}"))
            if n % 2
            else database.write(add_session(f"ses_{n}"))
            for n in range(40)
        )
    )

    assert database.stats.since(before).transactions < 40
    for n in range(40):
        assert await stored(database, f"ses_{n}")


@pytest.mark.sqlite_only
async def test_statement_units_queued_together_commit_in_fewer_transactions(
    database: Database,
) -> None:
    before = database.stats.snapshot()
    await asyncio.gather(*(database.write_statements(adding(f"ses_{n}")) for n in range(40)))

    assert database.stats.since(before).transactions < 40


async def test_a_statement_units_signals_fire_after_its_commit_only(database: Database) -> None:
    fired: list[signals.Signal] = []
    database.listener = fired.append

    await database.write_statements(adding("ses_ok", signal=signals.Notify("ses_ok")))
    with pytest.raises(Conflict):
        await database.write_statements(
            adding("ses_bad", fail=True, signal=signals.Notify("ses_bad"))
        )
    await asyncio.sleep(0)  # signals are delivered on the caller's loop

    assert fired == [signals.Notify("ses_ok")]


@pytest.mark.sqlite_only
async def test_a_statement_unit_that_breaks_its_connection_leaves_the_next_one_working(
    database: Database,
) -> None:
    async def break_it(db: AsyncSession) -> None:
        await ADD.execute(db, _row("ses_broken"))
        driver = db.info["strata.prepared.direct"][0]
        driver.raw.close()

    with pytest.raises(Exception):  # noqa: B017 - whichever error the closed handle gives
        await database.write_statements(break_it)

    assert await database.write_statements(adding("ses_after")) == "ses_after"
    assert await database.write(add_session("ses_orm")) == "ses_orm"
    assert not await stored(database, "ses_broken")


@pytest.mark.sqlite_only
async def test_a_connection_broken_between_units_is_replaced_after_one_failure(
    database: Database,
) -> None:
    """Broken while idle (its first statement, BEGIN, fails): dropped, not kept."""
    await database.write_statements(adding("ses_before"))
    writer = database._writer
    assert writer is not None and writer._direct is not None
    writer._direct.raw.close()

    with pytest.raises(Exception):  # noqa: B017 - whichever error the closed handle gives
        await database.write_statements(adding("ses_lost"))

    assert await database.write_statements(adding("ses_after")) == "ses_after"
    assert await stored(database, "ses_after")


async def test_an_orm_row_a_statement_unit_only_staged_is_written_with_it(
    database: Database,
) -> None:
    """Staged without a flush, it is flushed in the unit, not lost."""

    async def stages(db: AsyncSession) -> None:
        await ADD.execute(db, _row("ses_half"))
        db.add(Session(id="ses_staged", tenant="acme"))

    await database.write_statements(stages)

    assert await stored(database, "ses_half") and await stored(database, "ses_staged")


@pytest.mark.sqlite_only
async def test_a_statement_unit_that_waits_for_something_is_failed_and_the_writer_goes_on(
    database: Database,
) -> None:
    """The writer thread drives statement units without an event loop: one that waits
    would wait forever. It is failed there instead, its statements rolled back, and the
    units queued after it run as usual."""

    async def waits(db: AsyncSession) -> None:
        await ADD.execute(db, _row("ses_waited"))
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="waited for something"):
        await database.write_statements(waits)

    assert not await stored(database, "ses_waited")
    assert await database.write_statements(adding("ses_after")) == "ses_after"


@pytest.mark.sqlite_only
async def test_a_statement_unit_that_waits_again_after_being_failed_is_told_why(
    database: Database,
) -> None:
    """A unit that swallows the writer's error and waits once more is closed; its caller
    still learns that it waited, not an internal `GeneratorExit`."""

    async def waits_twice(db: AsyncSession) -> None:
        await ADD.execute(db, _row("ses_stubborn"))
        try:
            await asyncio.sleep(0)
        except RuntimeError:
            await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="waited for something"):
        await database.write_statements(waits_twice)

    assert not await stored(database, "ses_stubborn")
    assert await database.write_statements(adding("ses_after")) == "ses_after"
