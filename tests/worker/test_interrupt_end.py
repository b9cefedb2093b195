"""An interrupted turn's open calls are answered by the transaction that ends its job: no
moment exists, for a reader or a crash, where the job has ended and a `tool_use` is open,
or where the calls are answered and the job still runs."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.services.turn_control import interrupt_session
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, log_of, running
from tests.support.tools import agent_tools
from tests.support.units import count_write_units

pytestmark = pytest.mark.timeout(60)


async def test_an_interrupted_calls_results_are_written_by_the_jobs_end(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm, job_heartbeat_seconds=3600.0)
    fake_llm.reply(tool_use("slow", {"seconds": 60}))

    async with runtime(settings, with_runner=False, tools=agent_tools()) as parts:
        job_id = await enqueue_turn(parts.database, "Take your time.")
        session_id = (await job_of(parts.database, job_id)).session_id

        async def call_logged() -> bool:
            return len(await log_of(parts.database, session_id)) == 2

        async def interrupt(db: AsyncSession) -> None:
            await interrupt_session(db, "acme", session_id)

        async with running(parts, settings, "runner") as runner:
            parts.runner = runner  # told of the interrupt at its commit, as in one process
            await wait_until(call_logged)
            units = count_write_units(parts.database)
            await parts.database.write(interrupt)
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL))
        log = await log_of(parts.database, session_id)

    assert units == ["interrupt", "finish"]  # the results: in the end's unit, none before it
    assert [item["kind"] for item in log] == ["user_message", "assistant_message", "tool_result"]
    assert log[2]["content"].startswith("interrupted by the user")
