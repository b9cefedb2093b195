"""Many jobs, two worker processes, one killed mid-turn: every job ends, logs stay whole.

The API process runs no runner; two `strata worker` processes share its database
(SQLite or PostgreSQL, whichever the suite runs on). Every turn is one tool call
then an answer, each LLM call slow enough that a kill lands mid-turn.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

JOBS = 8
ANSWER_SECONDS = 2.0


def _turn_step(body: dict[str, Any]) -> Step:
    """A tool call first, the answer once the tool result is back (whoever asks). The
    answer is slow: a turn that has sent its second request is still running seconds
    later, whenever a loaded machine lets the test's kill land (at 0.3 s a busy machine's
    worker A can finish its turns before the kill)."""
    last = body["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    if answered:
        return reply(text("done"), delay=ANSWER_SECONDS)
    return reply(tool_use("current_time", {}), delay=0.3)


async def test_two_workers_finish_every_job_when_one_is_killed_mid_turn(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.always(_turn_step)
    worker_a = strata_procs.worker("a", STRATA_WORKER_CONCURRENCY="2")
    api = strata_procs.serve(run_worker_in_server=False)

    async with api.client() as client:
        sessions = [await new_session(client) for _ in range(JOBS)]
        job_ids = []
        for session_id in sessions:
            response = await client.post(f"/sessions/{session_id}/messages", json={"text": "go"})
            job_ids.append(response.json()["job_id"])

        async def running() -> list[str]:
            jobs = [(await client.get(f"/jobs/{j}")).json() for j in job_ids]
            return [j["id"] for j in jobs if j["status"] == "running"]

        for _ in range(400):  # worker A (alone so far) has turns in flight
            if await running():
                break
            await asyncio.sleep(0.025)
        taken_by_a = await running()
        assert taken_by_a, "worker A never started a job"
        strata_procs.worker("b", STRATA_WORKER_CONCURRENCY="2")
        await fake_llm.wait_for_requests(len(taken_by_a) + 1)

        assert worker_a.kill() == -signal.SIGKILL

        finished = [await wait_job(client, j, seconds=60) for j in job_ids]
        assert [j["status"] for j in finished] == ["succeeded"] * JOBS
        assert any(j["attempts"] >= 2 for j in finished if j["id"] in taken_by_a)
        for session_id in sessions:
            log = await items(client, session_id)
            assert_log_consistent(log)
            assert [i["kind"] for i in log if i["kind"] == "user_message"] == ["user_message"]
            assert log[-1]["kind"] == "assistant_message"
