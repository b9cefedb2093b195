"""A runner's slots: a job holds one while it works, not while its end is written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.db.models import Job
from app.wiring import runtime
from app.worker.handlers import Outcome
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, running

pytestmark = pytest.mark.timeout(60)


async def test_the_next_queued_job_starts_while_the_one_before_writes_its_end(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """One slot, two queued turns, and the first one's end slow to write: the second
    turn is claimed and asks the LLM meanwhile (the claim then commits beside that end,
    in one writer hand-off), and both end as usual."""
    settings = agent_settings(make_settings, fake_llm, worker_concurrency=1)
    fake_llm.reply("First.")
    fake_llm.reply("Second.")
    ends_written = asyncio.Event()

    async with runtime(settings, with_runner=False) as parts:
        async with running(parts, settings, "runner") as runner:
            finish = runner._finish

            async def slow_end(job: Job, outcome: Outcome) -> None:
                await ends_written.wait()
                await finish(job, outcome)

            runner._finish = slow_end  # type: ignore[method-assign]
            first = await enqueue_turn(parts.database, "one")
            second = await enqueue_turn(parts.database, "two")
            try:
                await fake_llm.wait_for_requests(2, within=10)
                assert (await job_of(parts.database, first)).status == "running"
            finally:
                ends_written.set()
            for job_id in (first, second):
                await wait_until(lambda j=job_id: has_status(parts.database, j, TERMINAL))
        statuses = [(await job_of(parts.database, j)).status for j in (first, second)]

    assert statuses == ["succeeded", "succeeded"]
