"""A steer is taken once: the transaction that appends it to the running turn also ends
its job, so a runner that stops after taking it and another that resumes the turn from
the log never deliver it twice."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.services.chat import IfBusy, send_message
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, reply, text, tool_use
from tests.support.chat import TERMINAL, held, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, log_of, running

pytestmark = pytest.mark.timeout(90)

STEER = "Use the blue one instead."


def _steers_in(body_messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for message in body_messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text" and block.get("text") == STEER
    )


async def test_a_steer_taken_before_a_restart_is_delivered_once(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm, worker_shutdown_grace_seconds=0.05)
    gate = threading.Event()
    fake_llm.enqueue(held(gate, reply(tool_use("echo", {"text": "red"}))))
    fake_llm.hang(120)  # the request after the steer: the first runner stops during it
    fake_llm.reply(text("Blue it is."))

    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Paint the fence.")
        session_id = (await job_of(parts.database, job_id)).session_id

        async def steer(db: AsyncSession) -> str:
            return (await send_message(db, "acme", session_id, STEER, IfBusy.steer)).id

        async with running(parts, settings, "first"):
            await fake_llm.wait_for_requests(1)
            steer_id = await parts.database.write(steer)
            gate.set()
            await fake_llm.wait_for_requests(2)
        assert not await has_status(parts.database, job_id, TERMINAL)
        async with running(parts, settings, "second"):
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)
        job = await job_of(parts.database, job_id)
        steer_job = await job_of(parts.database, steer_id)
        log = await log_of(parts.database, session_id)

    assert job.status == "succeeded" and job.attempts == 2
    assert steer_job.status == "succeeded" and steer_job.attempts == 0
    assert steer_job.result["steered_into"] == job_id
    assert [item["kind"] for item in log] == [
        "user_message",
        "assistant_message",
        "tool_result",
        "user_message",
        "assistant_message",
    ]
    assert len(fake_llm.requests) == 3
    assert [_steers_in(r.messages) for r in fake_llm.requests] == [0, 1, 1]
