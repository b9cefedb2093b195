"""Workers in their own processes: a killed worker's job is resumed, a stopped one hands back.

The API process runs no runner (`STRATA_RUN_WORKER_IN_SERVER=false`); `strata worker`
processes share its SQLite database. A worker subprocess offers the builtin tools only,
so the scripted tool call is `current_time`.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job, wait_until

# the bounds are generous: on a loaded machine a worker process takes many seconds to start
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


async def _send(client: httpx.AsyncClient, session_id: str, message: str) -> str:
    response = await client.post(f"/sessions/{session_id}/messages", json={"text": message})
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


async def _job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def _assert_no_duplicates(log: list[dict[str, Any]]) -> None:
    tool_use_ids = [
        block["id"]
        for item in log
        if item["kind"] == "assistant_message"
        for block in item["content"]
        if block["type"] == "tool_use"
    ]
    result_ids = [item["tool_use_id"] for item in log if item["kind"] == "tool_result"]
    assert len(tool_use_ids) == len(set(tool_use_ids))
    assert len(result_ids) == len(set(result_ids))


async def test_a_killed_workers_job_is_resumed_by_another_worker_from_the_log(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("current_time", {})
    fake_llm.reply(call)  # worker A: request 1
    fake_llm.hang(30)  # worker A: request 2, killed while it waits
    fake_llm.reply(text("It is now."))  # worker B: the resumed turn's request
    worker_a = strata_procs.worker("a")  # starts while the server gets ready
    api = strata_procs.serve(run_worker_in_server=False)

    async with api.client() as client:
        session_id = await new_session(client)
        job_id = await _send(client, session_id, "what time is it?")

        async def tool_result_logged() -> bool:
            return any(i["kind"] == "tool_result" for i in await items(client, session_id))

        await wait_until(tool_result_logged, seconds=60)
        await fake_llm.wait_for_requests(2)  # A is waiting on the LLM
        running = await _job(client, job_id)
        assert running["status"] == "running"
        assert running["attempts"] == 1

        assert worker_a.kill() == -signal.SIGKILL
        strata_procs.worker("b")
        job = await wait_job(client, job_id, seconds=60)

        assert job["status"] == "succeeded", job
        assert job["attempts"] >= 2
        assert job["result_text"] == "It is now."
        log = await items(client, session_id)
        assert [i["kind"] for i in log] == [
            "user_message",
            "assistant_message",
            "tool_result",
            "assistant_message",
        ]
        assert log[2]["tool_use_id"] == call.id
        assert log[2]["is_error"] is False
        assert log[3]["content"] == [{"type": "text", "text": "It is now."}]
        assert_log_consistent(log)
        _assert_no_duplicates(log)

    requests = fake_llm.requests
    assert len(requests) == 3
    # B continued from the log: the same conversation A had sent, not a replay of the turn.
    assert requests[2].messages == requests[1].messages


async def test_sigterm_hands_the_job_back_and_another_worker_finishes_it(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.hang(30)  # worker A: stopped while it waits
    fake_llm.reply(text("Finished by B."))
    worker_a = strata_procs.worker("a")  # starts while the server gets ready
    api = strata_procs.serve(run_worker_in_server=False)

    async with api.client() as client:
        session_id = await new_session(client)
        job_id = await _send(client, session_id, "hello")
        await fake_llm.wait_for_requests(1)
        assert (await _job(client, job_id))["status"] == "running"

        started = time.monotonic()
        worker_a.signal(signal.SIGTERM)
        assert worker_a.wait(timeout=5) == 0
        assert time.monotonic() - started < 5

        handed_back = await _job(client, job_id)
        assert handed_back["status"] == "queued"
        assert handed_back["attempts"] == 1
        assert handed_back["finished_at"] is None
        assert [i["kind"] for i in await items(client, session_id)] == ["user_message"]

        strata_procs.worker("b")
        job = await wait_job(client, job_id, seconds=60)

        assert job["status"] == "succeeded", job
        assert job["attempts"] == 2
        assert job["result_text"] == "Finished by B."
        log = await items(client, session_id)
        assert [i["kind"] for i in log] == ["user_message", "assistant_message"]
        assert_log_consistent(log)

    assert len(fake_llm.requests) == 2
