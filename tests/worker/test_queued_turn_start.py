"""A turn queued behind another appends its user message when it starts, in a statement
unit (prepared statements only, on SQLite the writer's direct connection), not an ORM
unit: changing the job's `input` through the ORM would cost the start of every queued
turn a whole ORM unit of work on the writer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, cast

import pytest
from sqlalchemy import inspect
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Item, Job
from app.db.repositories.sessions import SessionRepository
from app.domain.ids import new_id
from app.domain.jobs import JobKind
from app.services.chat import append_turn_input
from app.services.jobs import enqueue
from app.settings import Settings
from app.worker import kinds
from app.worker.runner import Runner
from tests.support.databases import database_with

SESSION = "ses_start"


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


async def queued_turn(database: Database) -> Job:
    async def queue(db: AsyncSession) -> Job:
        turn = await SessionRepository(db).reserve_turn(SESSION, "t")
        job = Job(
            id=new_id("job"),
            tenant="t",
            session_id=SESSION,
            kind=JobKind.chat,
            turn=turn,
            input={"text": "Summarize the release"},
        )
        return await enqueue(db, job)

    return await database.write(queue)


async def logged(database: Database) -> list[Item]:
    async with database.read() as db:
        query = select(Item).where(col(Item.session_id) == SESSION)
        return list((await db.exec(query.order_by(col(Item.seq)))).all())


async def test_a_queued_turns_message_is_appended_by_a_statement_unit(
    database: Database,
) -> None:
    job = await queued_turn(database)

    await database.write_statements(lambda db: append_turn_input(db, job))

    items = await logged(database)
    async with database.read() as db:
        stored = (await db.exec(select(Job).where(col(Job.id) == job.id))).one()
    assert [(i.kind, i.payload["content"], i.turn, i.origin) for i in items] == [
        ("user_message", [{"type": "text", "text": "Summarize the release"}], job.turn, "user")
    ]
    assert stored.input == {"text": "Summarize the release", "item_seq": items[0].seq}


async def test_the_runners_copy_holds_the_new_input_as_the_databases(database: Database) -> None:
    """Its later fenced writes merge it without reading it again (`held_job`)."""
    job = await queued_turn(database)

    await database.write_statements(lambda db: append_turn_input(db, job))

    assert "item_seq" in job.input
    assert not inspect(job).modified


async def test_a_turn_started_twice_appends_its_message_once(database: Database) -> None:
    job = await queued_turn(database)

    for _ in range(2):
        await database.write_statements(lambda db: append_turn_input(db, job))

    assert len(await logged(database)) == 1


def _runner(database: Database) -> Runner:
    """A runner to claim with (no job of it runs here)."""
    settings = Settings(_env_file=None, database_url="sqlite://")
    return Runner(settings, database, *cast(Any, (None, None, None, None)), worker_id="w")


async def test_a_queued_turn_is_claimed_and_its_message_appended_in_one_transaction(
    database: Database,
) -> None:
    """The claim and the turn's start are one write unit, not two."""
    job = await queued_turn(database)
    before = database.stats.snapshot()

    (claimed,) = await _runner(database)._claim(1)
    spent = database.stats.since(before)

    assert claimed.id == job.id
    assert claimed.input["item_seq"] == (await logged(database))[0].seq
    assert spent.transactions == 2  # the look, then the claim


async def test_a_claim_whose_start_fails_claims_alone_and_the_job_starts_on_its_own(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One job's failing start must not take the claim with it every poll (nothing would
    ever run): the jobs are claimed without their starts, each then starts itself."""
    job = await queued_turn(database)

    async def broken(db: AsyncSession, job: Job) -> None:
        raise ValueError("no start")

    chat = kinds.HANDLERS[JobKind.chat]
    monkeypatch.setitem(kinds.HANDLERS, JobKind.chat, replace(chat, on_claim=broken))

    (claimed,) = await _runner(database)._claim(1)

    assert (claimed.id, claimed.status, "item_seq" in claimed.input) == (job.id, "running", False)
    assert await logged(database) == []
