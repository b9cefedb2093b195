"""The hot path's statement budget, counted, not timed: what one agent step and one
one-request chat turn cost the database, in transactions and statements
(`Database.stats`), on both backends.

A turn runs as the step-overhead benchmark runs it (`bench.overhead.strata_turn`): the
real runner and SDK against the fake Messages API, the turn claimed outside the runner's
loop so that no poll or heartbeat of the runner falls inside what is counted. A step is
what lies between one request's start and the next's: logging an answer whose tool call
only reads, running the call, logging its result, building the next request. A
one-request turn is counted from its claim on to the end of its closing write.

These counts do not depend on load or on the machine: a change that makes a step or a
turn run one statement more than its budget fails here. The budget is SQLite's count:
Strata issues a SQLite transaction's `BEGIN` itself, and one of them counts as a
statement, so on PostgreSQL a step and a one-request turn each count one statement less.
One of the house's rules (`tests/test_house.py`)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.services.sessions import create_session
from app.settings import Settings
from bench.common import DbCounts
from bench.overhead import strata_turn
from bench.seed import TENANT
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.runners import agent_settings

pytestmark = pytest.mark.timeout(60)

STEP_BUDGET = DbCounts(transactions=2, statements=9)
"""One agent step whose tool call only reads."""
ONE_REQUEST_TURN_BUDGET = DbCounts(transactions=3, statements=14)
"""One chat turn answered by one request, from its claim on."""
STEPS = 4
"""Steps in the measured turn: each is held to the budget on its own."""


async def new_session(settings: Settings) -> str:
    database = Database(settings)
    try:

        async def work(db: AsyncSession) -> str:
            return (await create_session(db, TENANT)).id

        return await database.write(work)
    finally:
        await database.dispose()


def within(counts: DbCounts, budget: DbCounts) -> bool:
    return counts.transactions <= budget.transactions and counts.statements <= budget.statements


async def test_every_step_of_a_tool_loop_stays_within_the_step_budget(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm)
    for _ in range(STEPS):
        fake_llm.reply(tool_use("current_time", {}))
    fake_llm.reply("Done.")

    llm, _ = await strata_turn(settings, await new_session(settings), "Go on.")

    at = llm.at_request
    assert len(at) == STEPS + 1
    steps = [later - earlier for earlier, later in itertools.pairwise(at)]
    assert all(within(step, STEP_BUDGET) for step in steps), steps


async def test_a_one_request_turn_stays_within_its_budget(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm)
    fake_llm.reply("Done.")

    llm, turn = await strata_turn(settings, await new_session(settings), "Just answer.")

    assert len(llm.at_request) == 1
    assert within(turn, ONE_REQUEST_TURN_BUDGET), turn
