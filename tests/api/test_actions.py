"""Pending actions: a tool call a policy asks about waits for a person, who allows,
denies, edits or answers it; the turn then goes on with a request the API accepts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from app.db.types import utcnow
from app.services.actions import expire_due
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import assert_log_consistent, items, new_session, wait_job, wait_status
from tests.support.tools import agent_tools

ASK_ECHO = [{"tool": "echo", "effect": "ask", "reason": "a person reads it first"}]


async def _waiting_turn(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, *blocks: Any, rules: Any = None
) -> tuple[str, dict[str, Any]]:
    """A session whose turn asked for `blocks` and waits for a person: its id and job."""
    fake_llm.reply(*blocks)
    session_id = await new_session(client, tool_policy=rules or ASK_ECHO)
    sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "go"})
    assert sent.status_code == 202, sent.text
    job = await wait_status(client, sent.json()["job_id"], {"waiting_human"})
    return session_id, job


def _last_results(fake_llm: FakeMessagesAPI) -> dict[str, dict[str, Any]]:
    """The tool results of the last request's last message, by tool_use_id."""
    content = fake_llm.requests[-1].body["messages"][-1]["content"]
    return {b["tool_use_id"]: b for b in content if b["type"] == "tool_result"}


async def test_an_asked_call_pauses_the_turn_with_its_action_listed(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    _, job = await _waiting_turn(agent_client, fake_llm, call)

    [action] = job["required_action"]
    assert action["id"].startswith("act_")
    assert (action["tool"], action["input"], action["tool_use_id"]) == (
        "echo",
        {"text": "hi"},
        call.id,
    )
    assert action["status"] == "pending"
    assert action["rule"]["layer"] == "session" and action["rule"]["index"] == 0
    assert action["rule"]["rule"]["reason"] == "a person reads it first"
    assert len(fake_llm.requests) == 1


async def test_allow_runs_the_call_and_the_turn_answers(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    session_id, job = await _waiting_turn(agent_client, fake_llm, call)
    fake_llm.reply(text("It said hi."))
    action = job["required_action"][0]

    resolved = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )

    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["status"] == "resolved"
    ended = await wait_job(agent_client, job["id"])
    assert ended["status"] == "succeeded" and ended["result_text"] == "It said hi."
    assert _last_results(fake_llm)[call.id]["content"] == "hi"
    assert_log_consistent(await items(agent_client, session_id))


async def test_deny_answers_the_model_an_error_with_the_reason(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    _, job = await _waiting_turn(agent_client, fake_llm, call)
    fake_llm.reply(text("Understood."))
    action = job["required_action"][0]

    await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "deny", "reason": "not today"},
    )

    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    result = _last_results(fake_llm)[call.id]
    assert result["is_error"] is True and "not today" in str(result["content"])


async def test_edit_runs_the_call_with_the_new_input(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    _, job = await _waiting_turn(agent_client, fake_llm, call)
    fake_llm.reply(text("Done."))
    action = job["required_action"][0]

    await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "edit", "input": {"text": "hello"}},
    )

    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    assert _last_results(fake_llm)[call.id]["content"] == "hello"


async def test_respond_answers_the_given_content_without_running_the_call(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    _, job = await _waiting_turn(agent_client, fake_llm, call)
    fake_llm.reply(text("Thanks."))
    action = job["required_action"][0]

    await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "respond", "content": "from a person"},
    )

    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    result = _last_results(fake_llm)[call.id]
    assert result["content"] == "from a person" and not result.get("is_error")


async def test_an_edit_its_tool_refuses_is_a_422_and_nothing_resumes(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    action = job["required_action"][0]

    refused = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "edit", "input": {"words": 3}},
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"].startswith("input")
    again = (await agent_client.get(f"/jobs/{job['id']}")).json()
    assert again["status"] == "waiting_human"
    assert again["required_action"][0]["status"] == "pending"


async def test_the_calls_that_need_nothing_run_and_all_results_follow_the_call(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    asked = tool_use("echo", {"text": "hi"})
    free = tool_use("add", {"a": 1, "b": 2})
    session_id, job = await _waiting_turn(agent_client, fake_llm, asked, free)
    log = await items(agent_client, session_id)
    assert [i["content"] for i in log if i["kind"] == "tool_result"] == ["3"]
    fake_llm.reply(text("Both done."))

    await agent_client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}", json={"decision": "allow"}
    )

    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    results = _last_results(fake_llm)
    assert results[asked.id]["content"] == "hi" and results[free.id]["content"] == "3"


async def test_a_deny_rule_never_runs_the_call(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    fake_llm.reply(call)
    fake_llm.reply(text("OK."))
    rules = [{"tool": "echo", "effect": "deny", "reason": "never echo"}]
    session_id = await new_session(agent_client, tool_policy=rules)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
    )

    assert reply.status_code == 200, reply.text
    result = _last_results(fake_llm)[call.id]
    assert result["is_error"] is True and "never echo" in str(result["content"])


async def test_the_same_decision_again_answers_the_same_action(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("ok"))
    url = f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}"
    first = await agent_client.post(url, json={"decision": "allow"})

    again = await agent_client.post(url, json={"decision": "allow"})

    await wait_job(agent_client, job["id"])
    assert again.status_code == 200
    assert again.json() == first.json()


async def test_another_decision_on_a_resolved_action_is_a_409(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("ok"))
    url = f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}"
    await agent_client.post(url, json={"decision": "allow"})

    conflict = await agent_client.post(url, json={"decision": "deny"})

    await wait_job(agent_client, job["id"])
    assert conflict.status_code == 409, conflict.text
    assert conflict.headers["content-type"].startswith("application/problem+json")


async def test_an_unknown_action_is_a_404(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))

    missing = await agent_client.post(
        f"/jobs/{job['id']}/actions/act_nothing", json={"decision": "allow"}
    )

    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")


async def test_an_action_of_a_cancelled_job_is_a_409_and_its_call_is_answered(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    cancelled = await agent_client.post(f"/jobs/{job['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"

    late = await agent_client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}", json={"decision": "allow"}
    )

    assert late.status_code == 409, late.text
    assert_log_consistent(await items(agent_client, session_id))


async def test_remember_appends_the_rule_to_the_session(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("ok"))

    await agent_client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "allow", "remember": "session"},
    )

    await wait_job(agent_client, job["id"])
    rules = (await agent_client.get(f"/sessions/{session_id}")).json()["tool_policy"]
    assert [(r["tool"], r["effect"]) for r in rules] == [("echo", "ask"), ("echo", "allow")]


async def test_another_tenants_job_and_action_are_a_404(
    agent_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    keyed = agent_settings.model_copy(update={"api_keys": "acme:key-a,globex:key-b"})
    async with serve(keyed, tools=agent_tools()) as (_, client):
        client.headers["Authorization"] = "Bearer key-a"
        _, job = await _waiting_turn(client, fake_llm, tool_use("echo", {"text": "hi"}))
        url = f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}"

        client.headers["Authorization"] = "Bearer key-b"
        listed = await client.get(f"/jobs/{job['id']}/actions")
        resolved = await client.post(url, json={"decision": "allow"})

    assert listed.status_code == 404
    assert resolved.status_code == 404


async def _expire_all(app: FastAPI) -> int:
    """Resolve every pending action by its `on_timeout`, as the sweep does once it passed."""
    database = app.state.runtime.database
    later = utcnow() + timedelta(days=1)
    return int(await database.write(lambda db: expire_due(db, later, 100)))


async def test_an_expired_action_denies_its_call_and_the_turn_goes_on(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    rules = [{"tool": "echo", "effect": "ask", "expires_in": 3600}]
    _, job = await _waiting_turn(agent_client, fake_llm, call, rules=rules)
    assert job["required_action"][0]["on_timeout"] == "deny"
    fake_llm.reply(text("Nobody answered."))

    assert await _expire_all(agent_app) == 1

    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    result = _last_results(fake_llm)[call.id]
    assert result["is_error"] is True and "expired" in str(result["content"])
    [action] = (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert action["status"] == "expired"


async def test_an_expired_action_with_on_timeout_cancel_cancels_its_job(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    rules = [{"tool": "echo", "effect": "ask", "expires_in": 3600, "on_timeout": "cancel"}]
    session_id, job = await _waiting_turn(
        agent_client, fake_llm, tool_use("echo", {"text": "hi"}), rules=rules
    )

    await _expire_all(agent_app)

    assert (await agent_client.get(f"/jobs/{job['id']}")).json()["status"] == "cancelled"
    assert_log_consistent(await items(agent_client, session_id))


async def test_a_retry_with_the_same_idempotency_key_replays_the_first_answer(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("ok"))
    url = f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}"
    key = {"Idempotency-Key": "resolve-once"}
    first = await agent_client.post(url, json={"decision": "allow"}, headers=key)
    await wait_job(agent_client, job["id"])

    again = await agent_client.post(url, json={"decision": "allow"}, headers=key)

    assert again.status_code == 200
    assert again.json() == first.json()


async def test_a_batch_resolves_every_action_and_the_turn_goes_on_once(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    first = tool_use("echo", {"text": "one"})
    second = tool_use("echo", {"text": "two"})
    _, job = await _waiting_turn(agent_client, fake_llm, first, second)
    fake_llm.reply(text("Both."))
    ids = [a["id"] for a in job["required_action"]]

    batch = await agent_client.post(
        f"/jobs/{job['id']}/actions",
        json={
            "actions": [
                {"id": ids[0], "decision": "allow"},
                {"id": ids[1], "decision": "deny", "reason": "one is enough"},
            ]
        },
    )

    assert batch.status_code == 200, batch.text
    assert [a["decision"] for a in batch.json()["data"]] == ["allow", "deny"]
    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    results = _last_results(fake_llm)
    assert results[first.id]["content"] == "one"
    assert results[second.id]["is_error"] is True
    assert len(fake_llm.requests) == 2


async def test_a_batch_with_one_refused_decision_resolves_nothing(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    first = tool_use("echo", {"text": "one"})
    second = tool_use("echo", {"text": "two"})
    _, job = await _waiting_turn(agent_client, fake_llm, first, second)
    ids = [a["id"] for a in job["required_action"]]

    refused = await agent_client.post(
        f"/jobs/{job['id']}/actions",
        json={
            "actions": [
                {"id": ids[0], "decision": "allow"},
                {"id": ids[1], "decision": "edit", "input": {"text": 7}},
            ]
        },
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"].startswith("actions[1].input")
    pending = (await agent_client.get(f"/jobs/{job['id']}")).json()["required_action"]
    assert [a["status"] for a in pending] == ["pending", "pending"]


async def test_a_message_sent_while_a_turn_waits_is_refused_with_reject(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, _ = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))

    busy = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"if_busy": "reject"}, json={"text": "and?"}
    )

    assert busy.status_code == 409


async def test_the_wait_and_its_resolution_are_events_of_the_job(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("ok"))
    action_id = job["required_action"][0]["id"]
    await agent_client.post(f"/jobs/{job['id']}/actions/{action_id}", json={"decision": "allow"})
    await wait_job(agent_client, job["id"])

    stream = await agent_client.get(f"/jobs/{job['id']}/events")

    body = stream.text
    assert "event: action.required" in body and "event: action.resolved" in body
    assert body.index("event: action.required") < body.index("event: action.resolved")
    assert action_id in body


async def test_a_comment_on_a_waiting_turn_leaves_it_waiting_for_its_actions(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting_turn(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))

    comment = await agent_client.post(f"/jobs/{job['id']}/comments", json={"body": "well?"})

    assert comment.status_code == 201
    after = (await agent_client.get(f"/jobs/{job['id']}")).json()
    assert after["status"] == "waiting_human"
    assert after["updated_at"] == job["updated_at"]


async def test_an_interrupt_stops_a_turn_that_waits_for_people(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "hi"})
    session_id, job = await _waiting_turn(agent_client, fake_llm, call)

    interrupted = await agent_client.post(f"/sessions/{session_id}/interrupt")

    assert interrupted.status_code == 200, interrupted.text
    ended = await wait_job(agent_client, job["id"])
    assert ended["status"] == "cancelled"
    assert ended["error"]["type"].endswith(":interrupted")
    assert (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"][0][
        "status"
    ] == "cancelled"
    assert_log_consistent(await items(agent_client, session_id))
