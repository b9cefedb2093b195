"""How a runner's loop waits: a runner with a free slot polls for work another process
queued; a full one has nothing to claim until one of its jobs ends, which wakes it."""

from __future__ import annotations

from typing import Any

import pytest

from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, running

pytestmark = pytest.mark.timeout(60)

POLL_SECONDS = 0.02
LLM_SECONDS = 1.0


async def test_a_full_runner_waits_for_a_job_to_end_not_for_a_poll_interval(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """One slot, each job's answer a second away: the loop waits once while a job runs
    (it came round every poll interval before), and the next queued turn is claimed
    when the first one ends."""
    settings = agent_settings(
        make_settings, fake_llm, worker_concurrency=1, worker_poll_seconds=POLL_SECONDS
    )
    fake_llm.reply("First.", delay=LLM_SECONDS)
    fake_llm.reply("Second.", delay=LLM_SECONDS)
    waits: list[float] = []

    async with runtime(settings, with_runner=False) as parts:
        first = await enqueue_turn(parts.database, "one")
        second = await enqueue_turn(parts.database, "two")
        async with running(parts, settings, "runner") as runner:
            idle = runner._idle

            async def counted(stop: Any, seconds: float) -> None:
                waits.append(seconds)
                await idle(stop, seconds)

            runner._idle = counted  # type: ignore[method-assign]
            await wait_until(lambda: has_status(parts.database, first, TERMINAL))
            while_full = list(waits)
            await wait_until(lambda: has_status(parts.database, second, TERMINAL))

    # with a poll every 20 ms through the first answer, ~50 turns of the loop
    assert 1 <= len(while_full) <= 2, while_full
    assert set(while_full) == {settings.background_stall_seconds / 3}
