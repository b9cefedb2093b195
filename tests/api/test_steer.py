"""`if_busy=steer`: a message the running chat turn takes at its next step, after the
step's tool results and before its next request; a turn that ends first leaves it to run
as the next turn, and an idle session takes it as a plain message."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.api.test_pieces_flow import sse_events
from tests.fakes.messages_api import FakeMessagesAPI, reply, text, tool_use
from tests.support.apps import serve
from tests.support.chat import assert_log_consistent, held, items, new_session, wait_job
from tests.support.settings import MakeSettings
from tests.support.tools import agent_tools

STEER = "Use the blue one instead."


async def _send(client: httpx.AsyncClient, session_id: str, message: str, **params: Any) -> Any:
    response = await client.post(
        f"/sessions/{session_id}/messages", params=params, json={"text": message}
    )
    assert response.status_code == 202, response.text
    return response.json()


@dataclass
class Steered:
    """A turn that was steered while its first LLM call was in flight."""

    turn_job: dict[str, Any]
    steer_job: dict[str, Any]
    log: list[dict[str, Any]]


async def _steer_while_the_first_call_is_in_flight(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, first: Any, then: Any
) -> Steered:
    """The turn's first response (`first`) is served only once the steer is queued."""
    gate = threading.Event()
    fake_llm.enqueue(held(gate, first))
    if then is not None:
        fake_llm.enqueue(then)
    session_id = await new_session(client)
    turn = await _send(client, session_id, "Paint the fence.")
    await fake_llm.wait_for_requests(1)
    steer = await _send(client, session_id, STEER, if_busy="steer")
    gate.set()
    turn_job = await wait_job(client, turn["job_id"])
    steer_job = await wait_job(client, steer["job_id"])
    return Steered(turn_job, steer_job, await items(client, session_id))


@pytest.fixture
async def client(agent_client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    yield agent_client


async def test_a_steer_during_a_tool_step_is_sent_after_its_tool_results(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("echo", {"text": "red"})
    steered = await _steer_while_the_first_call_is_in_flight(
        client, fake_llm, reply(call), reply(text("Blue it is."))
    )

    assert steered.turn_job["status"] == "succeeded"
    assert steered.turn_job["result_text"] == "Blue it is."
    second = fake_llm.requests[1].messages  # the fake refused nothing: a valid request
    assert second[-1]["role"] == "user"
    assert [b["type"] for b in second[-1]["content"]] == ["tool_result", "text"]
    assert second[-1]["content"][0]["tool_use_id"] == call.id
    assert second[-1]["content"][1]["text"] == STEER
    assert len(fake_llm.requests) == 2


async def test_a_steer_taken_by_a_turn_is_logged_in_that_turn_and_its_job_names_it(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    steered = await _steer_while_the_first_call_is_in_flight(
        client, fake_llm, reply(tool_use("echo", {"text": "red"})), reply(text("Blue."))
    )

    log = steered.log
    assert [i["kind"] for i in log] == [
        "user_message",
        "assistant_message",
        "tool_result",
        "user_message",
        "assistant_message",
    ]
    assert log[3]["content"] == [{"type": "text", "text": STEER}]
    assert {i["turn"] for i in log} == {steered.turn_job["turn"]}
    assert_log_consistent(log)
    assert steered.steer_job["status"] == "succeeded"
    assert steered.steer_job["result_text"] is None
    job = (await client.get(f"/jobs/{steered.steer_job['id']}")).json()
    assert job["attempts"] == 0  # no runner ever ran it: the turn took it


async def test_a_steer_sent_when_the_turn_ends_first_runs_as_the_next_turn(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    steered = await _steer_while_the_first_call_is_in_flight(
        client, fake_llm, reply(text("Painted it red.")), reply(text("Repainting it blue."))
    )

    assert steered.turn_job["result_text"] == "Painted it red."
    assert steered.steer_job["result_text"] == "Repainting it blue."
    assert steered.steer_job["turn"] == steered.turn_job["turn"] + 1
    assert [(i["kind"], i["turn"]) for i in steered.log] == [
        ("user_message", 1),
        ("assistant_message", 1),
        ("user_message", 2),
        ("assistant_message", 2),
    ]
    assert steered.log[2]["content"] == [{"type": "text", "text": STEER}]


async def test_a_steer_no_turn_took_runs_before_a_message_queued_behind_it_in_turn_order(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """Turn numbers follow the log: memory and a fork's lineage read them as ranges."""
    gate = threading.Event()
    fake_llm.enqueue(held(gate, reply(text("Painted it red."))))
    fake_llm.enqueue(reply(text("Repainting it blue.")), reply(text("Done.")))
    session_id = await new_session(client)
    first = await _send(client, session_id, "Paint the fence.")
    await fake_llm.wait_for_requests(1)
    steer = await _send(client, session_id, STEER, if_busy="steer")
    queued = await _send(client, session_id, "Then clean the brushes.")
    gate.set()
    jobs = [await wait_job(client, sent["job_id"]) for sent in (first, steer, queued)]
    log = await items(client, session_id)

    assert [job["turn"] for job in jobs] == [1, 2, 3]
    users = [(i["turn"], i["content"][0]["text"]) for i in log if i["kind"] == "user_message"]
    assert users == [(1, "Paint the fence."), (2, STEER), (3, "Then clean the brushes.")]


async def test_a_steer_on_an_idle_session_is_a_plain_message(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("Hello."))
    session_id = await new_session(client)

    response = await client.post(
        f"/sessions/{session_id}/messages",
        params={"if_busy": "steer", "wait": "true"},
        json={"text": "hi"},
    )

    assert response.status_code == 200, response.text
    assert response.json()["text"] == "Hello."
    assert [i["kind"] for i in await items(client, session_id)] == [
        "user_message",
        "assistant_message",
    ]


async def test_a_steer_is_a_turn_steered_event_and_webhook(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(anthropic_base_url=fake_llm.url, webhook_allow_private=True)
    async with serve(settings, tools=agent_tools()) as (_, client):
        hook = await client.post(
            "/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["turn.steered"]}
        )
        steered = await _steer_while_the_first_call_is_in_flight(
            client, fake_llm, reply(tool_use("echo", {"text": "red"})), reply(text("Blue."))
        )
        job_id = steered.turn_job["id"]
        streamed = sse_events((await client.get(f"/jobs/{job_id}/events")).text)
        deliveries = (await client.get(f"/webhooks/{hook.json()['id']}/deliveries")).json()

    events = [e for e in streamed if e["type"] == "turn.steered"]
    assert events == [
        {
            "type": "turn.steered",
            "job_id": job_id,
            "session_id": steered.turn_job["session_id"],
            "turn": 1,
            "steer_job_id": steered.steer_job["id"],
            "seq": 4,
        }
    ]
    sent = [{"type": d["event_type"], **d["payload"]["data"]} for d in deliveries["data"]]
    assert sent == events


async def test_the_task_reminder_still_ends_the_request_after_a_steer(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        reminder_requests_since_task_write=0,
        reminder_requests_between_reminders=1,
    )
    gate = threading.Event()
    fake_llm.enqueue(held(gate, reply(tool_use("echo", {"text": "red"}))))
    fake_llm.enqueue(reply(text("Blue.")))
    async with serve(settings, tools=agent_tools()) as (_, client):
        session_id = await new_session(client)
        task = {"subject": "Paint", "description": "the fence"}
        assert (await client.post(f"/sessions/{session_id}/tasks", json=task)).status_code == 201
        turn = await _send(client, session_id, "Paint the fence.")
        await fake_llm.wait_for_requests(1)
        await _send(client, session_id, STEER, if_busy="steer")
        gate.set()
        assert (await wait_job(client, turn["job_id"]))["status"] == "succeeded"

    last = fake_llm.requests[1].messages[-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text", "text"]
    assert last[1]["text"] == STEER
    assert last[2]["text"].startswith("<system-reminder>")


async def test_a_steer_that_attaches_a_file_reaches_the_turn_with_it(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    uploaded = await client.post(
        "/files",
        params={"filename": "notes.md"},
        content=b"# Notes\n- blue",
        headers={"Content-Type": "text/markdown"},
    )
    assert uploaded.status_code == 201, uploaded.text
    gate = threading.Event()
    call = tool_use("echo", {"text": "red"})
    fake_llm.enqueue(held(gate, reply(call)), reply(text("Blue it is.")))
    session_id = await new_session(client)
    turn = await _send(client, session_id, "Paint the fence.")
    await fake_llm.wait_for_requests(1)
    steer = await client.post(
        f"/sessions/{session_id}/messages",
        params={"if_busy": "steer"},
        json={
            "content": [
                {"type": "text", "text": STEER},
                {"type": "document", "file_id": uploaded.json()["id"]},
            ]
        },
    )
    assert steer.status_code == 202, steer.text
    gate.set()

    assert (await wait_job(client, turn["job_id"]))["status"] == "succeeded"
    second = fake_llm.requests[1].messages
    assert [b["type"] for b in second[-1]["content"]] == ["tool_result", "text", "document"]
    assert second[-1]["content"][2]["source"]["data"] == "# Notes\n- blue"
