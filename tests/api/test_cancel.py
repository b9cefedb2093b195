"""POST /jobs/{id}/cancel: queued jobs end at once, running ones at their next step."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job, wait_until

CANCEL_WITHIN = 5.0  # the heartbeat is 0.1 s in agent_settings


async def _send(client: httpx.AsyncClient, session_id: str, message: str) -> str:
    response = await client.post(f"/sessions/{session_id}/messages", json={"text": message})
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


async def _cancel(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.post(f"/jobs/{job_id}/cancel")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["id"] == job_id
    return body


async def _assert_session_answers(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, session_id: str
) -> None:
    """After a cancel, the session takes a new message and the turn succeeds."""
    fake_llm.reply(text("Back again."))
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "still there?"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["job"]["status"] == "succeeded"
    assert response.json()["text"] == "Back again."
    log = await items(client, session_id)
    assert log[-1]["kind"] == "assistant_message"
    assert log[-1]["content"] == [{"type": "text", "text": "Back again."}]
    assert_log_consistent(log)


def _tool_uses(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for item in log
        if item["kind"] == "assistant_message"
        for block in item["content"]
        if block["type"] == "tool_use"
    ]


async def test_cancel_during_a_tool_call_closes_the_call_with_an_error_result(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    slow = tool_use("slow", {"seconds": 30})
    fake_llm.reply(slow)
    session_id = await new_session(agent_client)
    job_id = await _send(agent_client, session_id, "take your time")

    async def tool_use_logged() -> bool:
        return any(b["id"] == slow.id for b in _tool_uses(await items(agent_client, session_id)))

    await wait_until(tool_use_logged, seconds=10)
    body = await _cancel(agent_client, job_id)
    assert body["cancel_requested"] is True

    job = await wait_job(agent_client, job_id, seconds=CANCEL_WITHIN)
    assert job["status"] == "cancelled"
    assert job["error"] is None
    log = await items(agent_client, session_id)
    assert [i["kind"] for i in log] == ["user_message", "assistant_message", "tool_result"]
    assert log[2]["tool_use_id"] == slow.id
    assert log[2]["is_error"] is True
    assert "cancel" in log[2]["content"]
    assert_log_consistent(log)
    assert len(fake_llm.requests) == 1

    await _assert_session_answers(agent_client, fake_llm, session_id)


async def test_cancel_during_the_llm_call_appends_no_assistant_item(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.hang(30)
    session_id = await new_session(agent_client)
    job_id = await _send(agent_client, session_id, "think hard")
    await fake_llm.wait_for_requests(1)

    body = await _cancel(agent_client, job_id)
    assert body["status"] == "running"
    assert body["cancel_requested"] is True

    job = await wait_job(agent_client, job_id, seconds=CANCEL_WITHIN)
    assert job["status"] == "cancelled"
    log = await items(agent_client, session_id)
    assert [i["kind"] for i in log] == ["user_message"]
    assert_log_consistent(log)

    await _assert_session_answers(agent_client, fake_llm, session_id)


async def test_cancel_a_queued_job_ends_it_at_once_and_its_message_never_enters_the_log(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.hang(30)
    session_id = await new_session(agent_client)
    first = await _send(agent_client, session_id, "first message")
    await fake_llm.wait_for_requests(1)
    second = await _send(agent_client, session_id, "second message")

    queued = (await agent_client.get(f"/jobs/{second}")).json()
    assert queued["status"] == "queued"
    # Behind a running turn, a message's user item is appended only when its turn starts.
    assert [i["content"] for i in await items(agent_client, session_id)] == [
        [{"type": "text", "text": "first message"}]
    ]

    body = await _cancel(agent_client, second)
    assert body["status"] == "cancelled"
    assert body["finished_at"] is not None

    await _cancel(agent_client, first)
    assert (await wait_job(agent_client, first, seconds=CANCEL_WITHIN))["status"] == "cancelled"
    assert (await agent_client.get(f"/jobs/{second}")).json()["status"] == "cancelled"

    log = await items(agent_client, session_id)
    assert "second message" not in str(log)
    assert [i["kind"] for i in log] == ["user_message"]
    assert len(fake_llm.requests) == 1  # the cancelled queued job never ran

    await _assert_session_answers(agent_client, fake_llm, session_id)
    assert "second message" not in str(await items(agent_client, session_id))


async def test_cancel_a_finished_job_is_a_409_problem(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("Done."))
    session_id = await new_session(agent_client)
    response = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )
    assert response.status_code == 200, response.text
    job_id = response.json()["job_id"]

    response = await agent_client.post(f"/jobs/{job_id}/cancel")

    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 409
    assert problem["type"].startswith("urn:strata:problem:")
    assert "succeeded" in problem["detail"]
    assert problem["job_status"] == "succeeded"
    job = (await agent_client.get(f"/jobs/{job_id}")).json()
    assert job["status"] == "succeeded"
    assert job["cancel_requested"] is False


async def test_cancel_an_unknown_job_is_a_404_problem(agent_client: httpx.AsyncClient) -> None:
    response = await agent_client.post("/jobs/job_doesnotexist/cancel")

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["type"] == "urn:strata:problem:not-found"
