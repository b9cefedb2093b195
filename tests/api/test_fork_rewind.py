"""Fork, rewind and rollback: a session that reads another's log up to a point, one that
goes back to an earlier point of its own, and a message that takes back the running turn;
each request after them is one the validating fake Messages API accepts."""

from __future__ import annotations

import threading
from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.test_streams import _session_events_until
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import items, new_session, wait_job, wait_until


async def _say(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _two_turns(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> str:
    fake_llm.reply(text("one"))
    fake_llm.reply(text("two"))
    session_id = await new_session(client)
    await _say(client, session_id, "first")
    await _say(client, session_id, "second")
    return session_id


def _said(request_messages: list[dict[str, Any]]) -> list[str]:
    """Each message's text blocks, in order: what the model read."""
    return [
        block["text"]
        for message in request_messages
        for block in message["content"]
        if block["type"] == "text"
    ]


async def _fork(client: httpx.AsyncClient, session_id: str, **point: Any) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/fork", json=point)


async def _rewind(client: httpx.AsyncClient, session_id: str, **point: Any) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/rewind", json=point)


async def _tasks(client: httpx.AsyncClient, session_id: str) -> list[str]:
    response = await client.get(f"/sessions/{session_id}/tasks")
    assert response.status_code == 200, response.text
    return [task["subject"] for task in response.json()["data"]]


async def _add_task(client: httpx.AsyncClient, session_id: str, subject: str) -> None:
    response = await client.post(f"/sessions/{session_id}/tasks", json={"subject": subject})
    assert response.status_code == 201, response.text


# --- fork ---------------------------------------------------------------------------
async def test_a_fork_at_a_turn_sends_its_parents_turns_up_to_there_then_its_own(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)

    forked = await _fork(agent_client, parent, at_turn=1, title="branch")
    assert forked.status_code == 201, forked.text
    child = forked.json()["id"]
    fake_llm.reply(text("three"))
    await _say(agent_client, child, "another second")

    assert _said(fake_llm.requests[-1].messages) == ["first", "one", "another second"]
    assert forked.json()["title"] == "branch" and forked.json()["item_count"] == 2


async def test_a_forks_items_begin_with_its_parents_up_to_the_fork(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)
    child = (await _fork(agent_client, parent, at_turn=1)).json()["id"]
    fake_llm.reply(text("three"))
    await _say(agent_client, child, "another second")

    log = await items(agent_client, child)

    assert [(i["seq"], i["session_id"]) for i in log] == [
        (1, parent),
        (2, parent),
        (3, child),
        (4, child),
    ]
    assert len(await items(agent_client, parent)) == 4  # the parent is as it was


async def test_a_fork_before_a_turn_leaves_out_its_user_message(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)

    child = (await _fork(agent_client, parent, before_turn=2)).json()["id"]
    fake_llm.reply(text("edited"))
    answer = await _say(agent_client, child, "second, edited")

    assert _said(fake_llm.requests[-1].messages) == ["first", "one", "second, edited"]
    assert answer["job"]["turn"] == 2


async def test_a_forks_tasks_are_the_replay_up_to_the_fork_rest_edits_included(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    await _add_task(agent_client, session_id, "kept")
    fake_llm.reply(tool_use("TaskCreate", {"subject": "by the agent", "description": ""}))
    fake_llm.reply(text("made it"))
    await _say(agent_client, session_id, "make a task")
    await _add_task(agent_client, session_id, "after the fork")

    # 1 task event, 2 user, 3 tool_use, 4 its result, 5 answer, 6 task event
    child = (await _fork(agent_client, session_id, at_seq=5)).json()["id"]

    assert await _tasks(agent_client, child) == ["kept", "by the agent"]
    assert await _tasks(agent_client, session_id) == ["kept", "by the agent", "after the fork"]


async def test_a_fork_inside_a_tool_call_is_a_422_naming_the_nearest_points(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    fake_llm.reply(tool_use("TaskList", {}))
    fake_llm.reply(text("none"))
    await _say(agent_client, session_id, "list tasks")  # 1 user, 2 tool_use, 3 result, 4 text

    response = await _fork(agent_client, session_id, at_seq=2)

    assert response.status_code == 422
    assert response.json()["reason"] == "inside-tool-call"
    assert response.json()["nearest"] == [1, 3]


async def test_forking_a_running_session_at_its_head_is_a_409(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    gate = threading.Event()
    fake_llm.reply(text("eventually"), held=gate)
    session_id = await new_session(agent_client)
    sent = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})
    try:
        response = await _fork(agent_client, session_id, at_seq=1)
        earlier = await _fork(agent_client, session_id, at_seq=0)
    finally:
        gate.set()
    await wait_job(agent_client, sent.json()["job_id"])

    assert response.status_code == 409 and response.json()["reason"] == "session-busy"
    assert earlier.status_code == 201


async def test_a_fork_is_on_its_parents_stream_as_session_forked(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)
    child = (await _fork(agent_client, parent, at_turn=1)).json()["id"]

    streamed = await _session_events_until(agent_app, parent, "session.forked")

    forked = [e["data"] for e in streamed if e["event"] == "session.forked"]
    assert forked == [
        {
            "type": "session.forked",
            "session_id": parent,
            "job_id": None,
            "forked_session_id": child,
            "at_seq": 2,
            "turn": 1,
        }
    ]


async def test_a_fork_compacts_its_parents_turns_and_goes_on_with_valid_requests(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)
    child = (await _fork(agent_client, parent, at_turn=1)).json()["id"]
    fake_llm.reply(text("SUMMARY: a first question, answered."))

    compacted = await agent_client.post(f"/sessions/{child}/compact", params={"wait": "true"})
    fake_llm.reply(text("after the summary"))
    await _say(agent_client, child, "go on")

    assert compacted.status_code == 200 and compacted.json()["status"] == "succeeded"
    prompt = fake_llm.requests[-2].messages[0]["content"][0]["text"]
    assert "first" in prompt and "one" in prompt and "second" not in prompt
    said = _said(fake_llm.requests[-1].messages)
    assert "SUMMARY: a first question, answered." in said[0] and said[-1] == "go on"


async def test_a_session_with_forks_is_a_409_on_delete_until_they_are_gone(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent = await _two_turns(agent_client, fake_llm)
    child = (await _fork(agent_client, parent, at_turn=1)).json()["id"]

    refused = await agent_client.delete(f"/sessions/{parent}")
    await agent_client.delete(f"/sessions/{child}")
    deleted = await agent_client.delete(f"/sessions/{parent}")

    assert refused.status_code == 409 and refused.json()["reason"] == "session-has-forks"
    assert refused.json()["forks"] == [child]
    assert deleted.status_code == 204


async def test_another_tenants_session_is_a_404_on_fork(make_settings: Any) -> None:
    async with serve(make_settings(api_keys="acme:key-a,globex:key-b")) as (_, client):
        acme = {"Authorization": "Bearer key-a"}
        session_id = (await client.post("/sessions", json={}, headers=acme)).json()["id"]

        response = await client.post(
            f"/sessions/{session_id}/fork",
            json={"at_seq": 0},
            headers={"Authorization": "Bearer key-b"},
        )

    assert response.status_code == 404
    assert response.json()["type"] == "urn:strata:problem:not-found"


# --- rewind -------------------------------------------------------------------------
async def test_after_a_rewind_the_model_no_longer_sees_the_reverted_turn(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    rewound = await _rewind(agent_client, session_id, to_turn=1)
    assert rewound.status_code == 200, rewound.text
    fake_llm.reply(text("three"))
    await _say(agent_client, session_id, "instead")

    assert _said(fake_llm.requests[-1].messages) == ["first", "one", "instead"]
    assert rewound.json() == {
        "seq": 5,
        "to_seq": 2,
        "from_seq": 4,
        "segment": 1,
        "workspace": None,
    }


async def test_reverted_items_stay_in_the_log_flagged(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    await _rewind(agent_client, session_id, to_turn=1)

    log = await items(agent_client, session_id)
    assert [(i["kind"], i["reverted"]) for i in log] == [
        ("user_message", False),
        ("assistant_message", False),
        ("user_message", True),
        ("assistant_message", True),
        ("rewind", False),
    ]


async def test_a_rewind_takes_back_the_tasks_of_the_reverted_turns(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    await _add_task(agent_client, session_id, "kept")
    fake_llm.reply(tool_use("TaskCreate", {"subject": "reverted", "description": ""}))
    fake_llm.reply(text("made it"))
    await _say(agent_client, session_id, "make a task")

    await _rewind(agent_client, session_id, to_seq=1)

    assert await _tasks(agent_client, session_id) == ["kept"]
    await _add_task(agent_client, session_id, "after the rewind")
    assert await _tasks(agent_client, session_id) == ["kept", "after the rewind"]


async def test_reverted_turns_stay_in_the_timeline_and_detail_flagged(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    await _rewind(agent_client, session_id, to_turn=1)

    turns = (await agent_client.get(f"/sessions/{session_id}/turns")).json()["data"]
    assert [(t["turn"], t["reverted"]) for t in turns] == [(2, True), (1, False)]
    detail = await agent_client.get(f"/sessions/{session_id}/detail/{turns[0]['ended_at']}")
    assert detail.status_code == 200, detail.text
    first = detail.json()["data"][0]
    assert (first["turn"], first["reverted"]) == (2, True)


async def test_undo_is_a_rewind_to_the_end_before_the_last_rewind(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    first = (await _rewind(agent_client, session_id, to_turn=1)).json()

    undone = await _rewind(agent_client, session_id, to_seq=first["from_seq"])
    fake_llm.reply(text("back"))
    await _say(agent_client, session_id, "third")

    assert undone.status_code == 200, undone.text
    assert _said(fake_llm.requests[-1].messages) == ["first", "one", "second", "two", "third"]
    log = await items(agent_client, session_id)
    assert [i["seq"] for i in log if i["reverted"]] == [5]  # the first rewind's marker


async def test_rewinding_while_a_turn_runs_is_a_409(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    gate = threading.Event()
    fake_llm.reply(text("eventually"), held=gate)
    session_id = await new_session(agent_client)
    sent = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})
    try:
        response = await _rewind(agent_client, session_id, to_seq=0)
    finally:
        gate.set()
    await wait_job(agent_client, sent.json()["job_id"])

    assert response.status_code == 409 and response.json()["reason"] == "session-busy"


async def test_a_rewind_preview_says_what_would_change_and_changes_nothing(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    await _add_task(agent_client, session_id, "late")  # turn 2, after its answer

    response = await agent_client.get(
        f"/sessions/{session_id}/rewind-preview", params={"to_turn": 1}
    )

    assert response.status_code == 200, response.text
    preview = response.json()
    assert preview["reverted_turns"] == [2] and preview["restored_turns"] == []
    assert [t["subject"] for t in preview["tasks_before"]] == ["late"]
    assert preview["tasks_after"] == []
    assert len(await items(agent_client, session_id)) == 5
    assert await _tasks(agent_client, session_id) == ["late"]


async def test_a_rewind_is_on_the_sessions_stream_as_session_rewound(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    await _rewind(agent_client, session_id, to_turn=1)

    streamed = await _session_events_until(agent_app, session_id, "session.rewound")

    rewound = [e["data"] for e in streamed if e["event"] == "session.rewound"]
    assert rewound == [
        {
            "type": "session.rewound",
            "session_id": session_id,
            "job_id": None,
            "seq": 5,
            "to_seq": 2,
            "from_seq": 4,
            "segment": 1,
            "files": False,
        }
    ]


# --- rollback -----------------------------------------------------------------------
async def test_rollback_interrupts_the_turn_rewinds_before_it_and_runs_the_new_message(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("one"))
    session_id = await new_session(agent_client)
    await _say(agent_client, session_id, "first")
    fake_llm.hang(120)
    running = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "oops"})
    await fake_llm.wait_for_requests(2)

    fake_llm.reply(text("better"))
    response = await agent_client.post(
        f"/sessions/{session_id}/messages",
        params={"if_busy": "rollback", "wait": "true"},
        json={"text": "what I meant"},
    )

    assert response.status_code == 200, response.text
    assert (await wait_job(agent_client, running.json()["job_id"]))["status"] == "cancelled"
    assert _said(fake_llm.requests[-1].messages) == ["first", "one", "what I meant"]
    await wait_until(lambda: _has_reverted(agent_client, session_id, "oops"))


async def _has_reverted(client: httpx.AsyncClient, session_id: str, said: str) -> bool:
    return any(
        i["reverted"] and i["kind"] == "user_message" and i["content"][0]["text"] == said
        for i in await items(client, session_id)
    )
