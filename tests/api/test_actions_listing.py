"""`GET /actions`: the tenant's actions across its jobs and sessions (`status=pending`:
what waits for a person now), newest first, paged like the other lists."""

from __future__ import annotations

from typing import Any

import httpx

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session, wait_status
from tests.support.tools import agent_tools

ASK_ECHO = [{"tool": "echo", "effect": "ask"}]


async def _waiting_turn(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> dict[str, Any]:
    """A new session's turn that waits on one asked `echo` call: its job."""
    fake_llm.reply(tool_use("echo", {"text": "hi"}))
    session_id = await new_session(client, tool_policy=ASK_ECHO)
    sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "go"})
    assert sent.status_code == 202, sent.text
    return await wait_status(client, sent.json()["job_id"], {"waiting_human"})


async def test_pending_actions_of_every_session_are_listed_newest_first(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    first = await _waiting_turn(agent_client, fake_llm)
    second = await _waiting_turn(agent_client, fake_llm)

    listed = await agent_client.get("/actions", params={"status": "pending"})

    assert listed.status_code == 200, listed.text
    rows = listed.json()["data"]
    assert [(a["job_id"], a["session_id"]) for a in rows] == [
        (second["id"], second["session_id"]),
        (first["id"], first["session_id"]),
    ]
    assert listed.json()["next_cursor"] is None


async def test_a_resolved_action_leaves_the_pending_list(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    job = await _waiting_turn(agent_client, fake_llm)
    [action] = job["required_action"]
    fake_llm.reply(tool_use("echo", {"text": "again"}))  # the turn asks once more
    resolved = await agent_client.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "deny"}
    )
    assert resolved.status_code == 200, resolved.text
    again = await wait_status(agent_client, job["id"], {"waiting_human"})

    pending = (await agent_client.get("/actions", params={"status": "pending"})).json()
    everything = (await agent_client.get("/actions")).json()

    assert [a["id"] for a in pending["data"]] == [again["required_action"][0]["id"]]
    assert [a["status"] for a in everything["data"]] == ["pending", "resolved"]


async def test_the_list_pages_with_next_cursor(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    older = await _waiting_turn(agent_client, fake_llm)
    newer = await _waiting_turn(agent_client, fake_llm)

    first = (await agent_client.get("/actions", params={"status": "pending", "limit": 1})).json()
    second = (
        await agent_client.get(
            "/actions", params={"status": "pending", "limit": 1, "after": first["next_cursor"]}
        )
    ).json()

    assert [a["job_id"] for a in first["data"]] == [newer["id"]]
    assert [a["job_id"] for a in second["data"]] == [older["id"]]
    assert second["next_cursor"] is None


async def test_a_cursor_that_is_no_action_id_is_a_422(agent_client: httpx.AsyncClient) -> None:
    answer = await agent_client.get("/actions", params={"after": "job_nope"})

    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")


async def test_another_tenants_pending_actions_are_not_listed(
    agent_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    keyed = agent_settings.model_copy(update={"api_keys": "acme:key-a,globex:key-b"})
    async with serve(keyed, tools=agent_tools()) as (_, client):
        client.headers["Authorization"] = "Bearer key-a"
        await _waiting_turn(client, fake_llm)

        client.headers["Authorization"] = "Bearer key-b"
        listed = await client.get("/actions", params={"status": "pending"})

    assert listed.status_code == 200 and listed.json()["data"] == []
