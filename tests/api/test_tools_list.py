"""GET /tools: the tools a session's `tools` may name, with what each is for."""

from __future__ import annotations

import httpx


async def test_tools_lists_every_tool_a_session_may_name(client: httpx.AsyncClient) -> None:
    tools = (await client.get("/tools")).json()["data"]
    names = [t["name"] for t in tools]

    assert names == sorted(names)
    assert {"TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "transition"} <= set(names)
    created = await client.post("/sessions", json={"tools": names})
    assert created.status_code == 201, created.text


async def test_tools_say_which_a_chat_is_offered_and_what_they_take(
    client: httpx.AsyncClient,
) -> None:
    tools = {t["name"]: t for t in (await client.get("/tools")).json()["data"]}

    assert tools["TaskCreate"]["in_chat"] is True
    assert tools["transition"]["in_chat"] is False
    assert "subject" in tools["TaskCreate"]["input_schema"]["properties"]
    assert tools["TaskCreate"]["description"]
