"""Client-executed tools: offered to the model like any tool, never run by the server;
a call waits as an action of kind `client_tool` that only `respond` answers."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job, wait_status

PICK_FILE = {
    "name": "pick_file",
    "description": "Ask the user to pick a file; answers its path.",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


async def _waiting(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, *blocks: Any
) -> tuple[str, dict[str, Any]]:
    fake_llm.reply(*blocks)
    session_id = await new_session(client, client_tools=[PICK_FILE])
    sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "pick one"})
    job = await wait_status(client, sent.json()["job_id"], {"waiting_human"})
    return session_id, job


async def test_a_client_tool_is_offered_to_the_model(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("No need."))
    session_id = await new_session(agent_client, client_tools=[PICK_FILE])

    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    offered = {tool["name"]: tool for tool in fake_llm.requests[0].body["tools"]}
    assert offered["pick_file"]["input_schema"] == PICK_FILE["input_schema"]
    assert "echo" in offered


async def test_a_client_tools_call_waits_and_respond_answers_it(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("pick_file", {"prompt": "which?"})
    session_id, job = await _waiting(agent_client, fake_llm, call)
    [action] = job["required_action"]
    assert (action["kind"], action["tool"], action["rule"]) == ("client_tool", "pick_file", None)
    fake_llm.reply(text("You picked notes.txt."))

    answered = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "respond", "content": "notes.txt"},
    )

    assert answered.status_code == 200, answered.text
    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    last = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert (last["tool_use_id"], last["content"]) == (call.id, "notes.txt")
    assert_log_consistent(await items(agent_client, session_id))


async def test_allow_on_a_client_tools_call_is_a_422(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting(agent_client, fake_llm, tool_use("pick_file", {}))

    refused = await agent_client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "allow"},
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "decision"
    assert (await agent_client.get(f"/jobs/{job['id']}")).json()["status"] == "waiting_human"


async def test_a_client_tool_named_like_a_server_tool_is_a_422(
    agent_client: httpx.AsyncClient,
) -> None:
    clash = {**PICK_FILE, "name": "echo"}

    refused = await agent_client.post("/sessions", json={"client_tools": [clash]})

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "client_tools[0].name"


async def test_a_messages_client_tool_is_offered_for_its_turn_only(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    fake_llm.reply(text("No need."))
    fake_llm.reply(text("Nothing to pick."))

    await agent_client.post(
        f"/sessions/{session_id}/messages",
        params={"wait": "true"},
        json={"text": "hi", "client_tools": [PICK_FILE]},
    )
    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "again"}
    )

    first, second = (
        {tool["name"] for tool in request.body["tools"]} for request in fake_llm.requests
    )
    assert "pick_file" in first and "echo" in first
    assert "pick_file" not in second and "echo" in second


async def test_a_messages_client_tools_call_waits_and_only_respond_answers_it(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("pick_file", {"prompt": "which?"})
    fake_llm.reply(call)
    session_id = await new_session(agent_client)
    sent = await agent_client.post(
        f"/sessions/{session_id}/messages", json={"text": "pick", "client_tools": [PICK_FILE]}
    )
    job = await wait_status(agent_client, sent.json()["job_id"], {"waiting_human"})
    [action] = job["required_action"]
    fake_llm.reply(text("You picked a.txt."))
    fake_llm.reply(text("Hello again."))

    allowed = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )
    answered = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "respond", "content": "a.txt"},
    )
    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    later = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    assert (action["kind"], allowed.status_code, answered.status_code) == ("client_tool", 422, 200)
    assert later.status_code == 200, later.text
    assert_log_consistent(await items(agent_client, session_id))


async def test_a_messages_client_tool_named_like_a_server_tool_is_a_422(
    agent_client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(agent_client)

    refused = await agent_client.post(
        f"/sessions/{session_id}/messages",
        json={"text": "hi", "client_tools": [{**PICK_FILE, "name": "echo"}]},
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "client_tools[0].name"
    assert (await agent_client.get("/jobs", params={"session_id": session_id})).json()["data"] == []


async def test_a_steer_with_client_tools_is_a_422(agent_client: httpx.AsyncClient) -> None:
    session_id = await new_session(agent_client)

    refused = await agent_client.post(
        f"/sessions/{session_id}/messages",
        params={"if_busy": "steer"},
        json={"text": "hi", "client_tools": [PICK_FILE]},
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "client_tools"
