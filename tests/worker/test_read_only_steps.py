"""A step whose tool calls only read is logged in one transaction, once they ran.

A call that changes something (a file, a task) is logged before it runs, so that a
crash in between leaves the call dangling and the resumed turn closes it as
interrupted. A call that only reads needs no such mark: if the process dies before the
step is logged, the resumed turn asks the LLM again and nothing happened twice. Such a
step costs one write transaction (the response and its results) instead of two.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, log_of, running
from tests.support.units import count_write_units

pytestmark = pytest.mark.timeout(60)


async def one_turn(
    make_settings: Any, fake_llm: FakeMessagesAPI, call: str, args: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """A turn that makes one call of `call`, then answers: its write units (from the
    claim on) and the kinds of its log's items."""
    settings = agent_settings(make_settings, fake_llm, job_heartbeat_seconds=3600.0)
    fake_llm.reply(tool_use(call, args))
    fake_llm.reply("Done.")
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Go on.")
        units = count_write_units(parts.database)
        async with running(parts, settings, "runner"):
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)
        job = await job_of(parts.database, job_id)
        log = await log_of(parts.database, job.session_id)
    assert job.status == "succeeded"
    return units, [item["kind"] for item in log]


async def test_a_step_whose_calls_only_read_is_logged_in_one_transaction(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    units, kinds = await one_turn(make_settings, fake_llm, "current_time", {})

    assert kinds == ["user_message", "assistant_message", "tool_result", "assistant_message"]
    assert units == ["claim_and_start", "fenced", "finish"]  # the step: one fenced unit of the job


async def test_a_call_that_changes_something_is_logged_before_it_runs(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """TaskCreate records its result with its effect, in a unit of its own: the response
    that asked for it was logged by the unit before."""
    units, kinds = await one_turn(
        make_settings, fake_llm, "TaskCreate", {"subject": "Ship", "description": "Ship it."}
    )

    assert kinds == ["user_message", "assistant_message", "tool_result", "assistant_message"]
    assert units[:2] == ["claim_and_start", "fenced"] and len(units) == 4
