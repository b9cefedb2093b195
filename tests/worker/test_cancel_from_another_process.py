"""A cancel asked in another process reaches a running turn through the database: the
turn's runner sees the flag at the turn's next step, whose probe reads it (a turn's first
request makes no probe of its own: its start read the flag with the claim, so a cancel
asked after the claim stops the turn at its second step, before a second request), or at
its heartbeat. On PostgreSQL the cancel's NOTIFY also reaches the runner's process at
once (`LiveHub.cancel`), which stops the job in the middle of its LLM call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.services.jobs import cancel_job
from app.services.live_bridge import PgLiveBridge
from app.services.turn_control import interrupt_session
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, log_of, running

pytestmark = pytest.mark.timeout(60)


async def test_a_cancel_asked_in_another_process_stops_the_turn_at_its_next_step(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    # no heartbeat during the turn: only the step's probe can see the flag
    settings = agent_settings(make_settings, fake_llm, job_heartbeat_seconds=3600.0)
    fake_llm.reply(tool_use("TaskList", {}, id="toolu_list"), delay=0.5)  # the only answer

    async with (
        runtime(settings, with_runner=False) as parts,
        runtime(settings, with_runner=False) as elsewhere,  # another process, no runner
    ):
        job_id = await enqueue_turn(parts.database, "List my tasks.")
        async with running(parts, settings, "runner"):
            await fake_llm.wait_for_requests(1)

            async def cancel(db: AsyncSession) -> None:
                await cancel_job(db, "acme", job_id)

            await elsewhere.database.write(cancel)
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=20)
        job = await job_of(parts.database, job_id)
        log = await log_of(parts.database, job.session_id)

    assert job.status == "cancelled"
    assert len(fake_llm.requests) == 1
    assert [item["kind"] for item in log] == ["user_message", "assistant_message", "tool_result"]


@pytest.mark.postgresql_only
async def test_an_interrupt_asked_in_another_process_stops_the_llm_call_at_once(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    # no heartbeat and no step before the call ends: only the NOTIFY can stop it in time
    settings = agent_settings(make_settings, fake_llm, job_heartbeat_seconds=3600.0)
    fake_llm.hang(120)

    async with (
        runtime(settings, with_runner=True) as worker,
        runtime(settings, with_runner=False) as api,  # another process
    ):
        bridge = worker.hub.bridge
        assert isinstance(bridge, PgLiveBridge)
        await asyncio.wait_for(bridge.listening.wait(), 20)
        job_id = await enqueue_turn(api.database, "Think hard.")
        await fake_llm.wait_for_requests(1)
        job = await job_of(api.database, job_id)

        async def interrupt(db: AsyncSession) -> None:
            await interrupt_session(db, "acme", job.session_id)

        await api.database.write(interrupt)
        await wait_until(lambda: has_status(api.database, job_id, TERMINAL), seconds=20)
        ended = await job_of(api.database, job_id)
        log = await log_of(api.database, job.session_id)

    assert ended.status == "cancelled"
    assert ended.error["type"] == "urn:strata:problem:interrupted"
    assert [item["kind"] for item in log] == ["user_message"]
