"""The task tools (seed 001) through the real SDK and the fake Messages API.

What the model "receives" is read from the next request the fake recorded: the tool
results there are exactly what the SDK sent to the model.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session

TASK_TOOLS = {"TaskCreate", "TaskUpdate", "TaskList", "TaskGet"}


async def _turn(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
    )
    assert response.status_code == 200, response.text
    job = response.json()["job"]
    assert job["status"] == "succeeded", job
    return dict(response.json())


async def _tasks(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/sessions/{session_id}/tasks")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def _brief(tasks: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
    return [(t["taskid"], t["status"], t["subject"], t["description"]) for t in tasks]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def _results(request: RecordedRequest) -> dict[str, tuple[str, bool]]:
    """The tool results in the request's last message: tool_use_id -> (text, is_error)."""
    last = request.messages[-1]
    assert last["role"] == "user"
    return {
        block["tool_use_id"]: (_content_text(block["content"]), bool(block.get("is_error")))
        for block in last["content"]
        if block["type"] == "tool_result"
    }


def _user_texts(request: RecordedRequest) -> list[str]:
    return [
        block["text"]
        for message in request.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "text"
    ]


async def test_the_task_tools_are_offered_and_create_has_no_taskid(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("ok"))
    session_id = await new_session(agent_client)

    await _turn(agent_client, session_id, "hi")

    tools = {tool["name"]: tool for tool in fake_llm.requests[0].tools}
    assert set(tools) >= TASK_TOOLS
    create_schema = tools["TaskCreate"]["input_schema"]
    assert "taskid" not in create_schema["properties"]
    assert set(create_schema["properties"]) == {"subject", "description"}
    assert create_schema["required"] == ["subject"]
    assert create_schema.get("additionalProperties") is False
    update_schema = tools["TaskUpdate"]["input_schema"]
    assert set(update_schema["properties"]) == {"taskid", "status", "subject", "description"}
    assert update_schema["required"] == ["taskid"]
    assert "taskid" in tools["TaskGet"]["input_schema"]["properties"]
    assert tools["TaskList"]["input_schema"].get("properties", {}) == {}


async def test_create_twice_then_update_returns_the_task_and_a_summary_each_time(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    first = tool_use("TaskCreate", {"subject": "read the code", "description": "all of app/"})
    second = tool_use("TaskCreate", {"subject": "write tests"})
    start = tool_use("TaskUpdate", {"taskid": 1, "status": "inprogress"})
    fake_llm.reply(text("Planning."), first, second)
    fake_llm.reply(start)
    fake_llm.reply(text("Working on it."))
    session_id = await new_session(agent_client)

    reply = await _turn(agent_client, session_id, "plan the work")

    assert reply["text"] == "Working on it."
    created = _results(fake_llm.requests[1])
    assert set(created) == {first.id, second.id}
    first_text, first_error = created[first.id]
    second_text, second_error = created[second.id]
    assert (first_error, second_error) == (False, False)
    assert first_text.startswith("Created task 1:\n[1] pending: read the code\n    all of app/")
    assert "1 task: 1 pending, 0 inprogress, 0 completed, 0 deleted" in first_text
    assert second_text.startswith("Created task 2:\n[2] pending: write tests")
    assert second_text.endswith(
        "2 tasks: 2 pending, 0 inprogress, 0 completed, 0 deleted\n"
        "[1] pending: read the code\n"
        "[2] pending: write tests"
    )

    updated_text, updated_error = _results(fake_llm.requests[2])[start.id]
    assert updated_error is False
    assert updated_text == (
        "Updated task 1:\n[1] inprogress: read the code\n    all of app/\n\n"
        "2 tasks: 1 pending, 1 inprogress, 0 completed, 0 deleted\n"
        "[1] inprogress: read the code\n"
        "[2] pending: write tests"
    )

    assert _brief(await _tasks(agent_client, session_id)) == [
        (1, "inprogress", "read the code", "all of app/"),
        (2, "pending", "write tests", ""),
    ]
    log = await items(agent_client, session_id)
    assert_log_consistent(log)  # each result recorded once, though the tool wrote it itself
    results = [i for i in log if i["kind"] == "tool_result"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [
        (first.id, False),
        (second.id, False),
        (start.id, False),
    ]


async def test_refused_updates_are_error_results_and_change_nothing(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    await agent_client.post(
        f"/sessions/{session_id}/tasks", json={"subject": "only", "description": "d"}
    )
    before = await _tasks(agent_client, session_id)
    unknown = tool_use("TaskUpdate", {"taskid": 9, "status": "completed"})
    empty = tool_use("TaskUpdate", {"taskid": 1})
    bad_status = tool_use("TaskUpdate", {"taskid": 1, "status": "done"})
    new_id = tool_use("TaskUpdate", {"taskid": 1, "new_taskid": 5, "subject": "x"})
    chosen_id = tool_use("TaskCreate", {"subject": "mine", "taskid": 7})
    get_unknown = tool_use("TaskGet", {"taskid": 9})
    fake_llm.reply(unknown, empty, bad_status, new_id, chosen_id, get_unknown)
    fake_llm.reply(text("I see."))

    await _turn(agent_client, session_id, "try things")

    results = _results(fake_llm.requests[1])
    assert {call_id: is_error for call_id, (_, is_error) in results.items()} == {
        unknown.id: True,
        empty.id: True,
        bad_status.id: True,
        new_id.id: True,
        chosen_id.id: True,
        get_unknown.id: True,
    }
    assert "task 9 does not exist" in results[unknown.id][0]
    assert "at least one of status, subject, description" in results[empty.id][0]
    assert "status" in results[bad_status.id][0]
    assert "taskid" in results[chosen_id.id][0]
    assert "task 9 does not exist" in results[get_unknown.id][0]

    assert await _tasks(agent_client, session_id) == before
    log = await items(agent_client, session_id)
    assert_log_consistent(log)
    assert all(i["is_error"] for i in log if i["kind"] == "tool_result")


async def test_task_list_shows_every_task_and_task_get_one(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    for subject in ("alpha", "beta", "gamma", "delta"):
        await agent_client.post(
            f"/sessions/{session_id}/tasks",
            json={"subject": subject, "description": f"about {subject}"},
        )
    await agent_client.patch(f"/sessions/{session_id}/tasks/2", json={"status": "inprogress"})
    await agent_client.patch(f"/sessions/{session_id}/tasks/3", json={"status": "completed"})
    await agent_client.patch(f"/sessions/{session_id}/tasks/4", json={"status": "deleted"})
    listing = tool_use("TaskList", {})
    one = tool_use("TaskGet", {"taskid": 3})
    fake_llm.reply(listing, one)
    fake_llm.reply(text("Noted."))

    await _turn(agent_client, session_id, "what is left?")

    results = _results(fake_llm.requests[1])
    list_text, list_error = results[listing.id]
    assert list_error is False
    assert list_text == (
        "[1] pending: alpha\n    about alpha\n"
        "[2] inprogress: beta\n    about beta\n"
        "[3] completed: gamma\n    about gamma\n"
        "[4] deleted: delta\n    about delta\n\n"
        "4 tasks: 1 pending, 1 inprogress, 1 completed, 1 deleted"
    )
    assert results[one.id] == ("[3] completed: gamma\n    about gamma", False)
    # reads change nothing and record no task operation
    assert [t["status"] for t in await _tasks(agent_client, session_id)] == [
        "pending",
        "inprogress",
        "completed",
        "deleted",
    ]


async def test_the_model_renames_and_deletes_and_deleted_tasks_stay_listed(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    fake_llm.reply(
        tool_use("TaskCreate", {"subject": "a"}), tool_use("TaskCreate", {"subject": "b"})
    )
    fake_llm.reply(
        tool_use("TaskUpdate", {"taskid": 1, "status": "deleted"}),
        tool_use("TaskUpdate", {"taskid": 2, "subject": "b, renamed", "description": "why"}),
    )
    listing = tool_use("TaskList", {})
    fake_llm.reply(listing)
    fake_llm.reply(text("done"))

    await _turn(agent_client, session_id, "go")

    assert _brief(await _tasks(agent_client, session_id)) == [
        (1, "deleted", "a", ""),
        (2, "pending", "b, renamed", "why"),
    ]
    list_text, _ = _results(fake_llm.requests[3])[listing.id]
    assert list_text.startswith("[1] deleted: a\n[2] pending: b, renamed\n    why")


async def test_rest_changes_between_turns_reach_the_agent_as_a_note_in_its_user_turn(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskCreate", {"subject": "draft"}))
    fake_llm.reply(text("Created."))
    fake_llm.reply(text("Seen."))
    session_id = await new_session(agent_client)
    await _turn(agent_client, session_id, "make a task")
    assert not any("<task-note>" in t for t in _user_texts(fake_llm.requests[1]))

    created = await agent_client.post(
        f"/sessions/{session_id}/tasks", json={"subject": "review", "description": "long text"}
    )
    patched = await agent_client.patch(
        f"/sessions/{session_id}/tasks/1", json={"status": "completed"}
    )
    assert (created.status_code, patched.status_code) == (201, 200)
    await _turn(agent_client, session_id, "carry on")

    request = fake_llm.requests[2]
    last = request.messages[-1]
    assert last["role"] == "user"
    notes = [
        b["text"] for b in last["content"] if b["type"] == "text" and "<task-note>" in b["text"]
    ]
    assert notes == [
        "<task-note>A user created task 2: review (via the API).</task-note>",
        "<task-note>A user updated task 1: status='completed' (via the API).</task-note>",
    ]
    assert all(len(note) < 200 for note in notes)  # short: no description, no snapshot
    assert "carry on" in [b.get("text") for b in last["content"]]
    assert not any(
        "<task-note>" in _content_text(m["content"])
        for m in request.messages
        if m["role"] == "assistant"
    )

    log = await items(agent_client, session_id)
    assert [(i["kind"], i["origin"]) for i in log if i["kind"] == "task_event"] == [
        ("task_event", "api"),
        ("task_event", "api"),
    ]
    for item in log:
        if item["kind"] == "assistant_message":
            assert "<task-note>" not in str(item["content"])
    assert _brief(await _tasks(agent_client, session_id)) == [
        (1, "completed", "draft", ""),
        (2, "pending", "review", "long text"),
    ]
