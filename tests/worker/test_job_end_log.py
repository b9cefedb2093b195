"""A job's run is logged at both ends: the runner's "claimed" line has a partner saying how
the run ended, so a job that never ended shows in the log as one without it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, running

pytestmark = pytest.mark.timeout(60)


async def test_a_jobs_end_is_logged_with_how_it_ended(
    make_settings: Any, fake_llm: FakeMessagesAPI, caplog: pytest.LogCaptureFixture
) -> None:
    settings = agent_settings(make_settings, fake_llm)
    fake_llm.reply("Done.")
    caplog.set_level(logging.INFO, logger="strata.runner")
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Hello.")
        async with running(parts, settings, "runner-log"):
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)

    lines = [r.getMessage() for r in caplog.records if job_id in r.getMessage()]
    assert any("claimed by runner runner-log" in line for line in lines)
    assert f"job {job_id} succeeded (runner runner-log)" in lines
