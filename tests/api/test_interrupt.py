"""POST /sessions/{id}/interrupt and `if_busy=interrupt`: the running turn stops at once,
every call it left open is answered as interrupted by the user with the job's end, and the
session's next request is one the Messages API accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.api.test_pieces_flow import sse_events
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import (
    assert_log_consistent,
    items,
    new_session,
    submit_job,
    wait_job,
    wait_until,
)
from tests.support.settings import MakeSettings

INTERRUPTED = "urn:strata:problem:interrupted"


async def _send(client: httpx.AsyncClient, session_id: str, message: str, **params: Any) -> str:
    response = await client.post(
        f"/sessions/{session_id}/messages", params=params, json={"text": message}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


async def _interrupt(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await client.post(f"/sessions/{session_id}/interrupt")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _logged(client: httpx.AsyncClient, session_id: str, tool_use_id: str) -> bool:
    log = await items(client, session_id)
    return any(
        block.get("id") == tool_use_id
        for item in log
        if item["kind"] == "assistant_message"
        for block in item["content"]
    )


async def test_interrupt_during_a_tool_call_answers_it_and_ends_the_job_interrupted(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    slow = tool_use("slow", {"seconds": 60})
    fake_llm.reply(slow)
    session_id = await new_session(agent_client)
    job_id = await _send(agent_client, session_id, "take your time")
    await wait_until(lambda: _logged(agent_client, session_id, slow.id))

    asked = await _interrupt(agent_client, session_id)

    assert asked["id"] == job_id and asked["cancel_requested"] is True
    job = await wait_job(agent_client, job_id)
    assert job["status"] == "cancelled"
    assert job["error"]["type"] == INTERRUPTED
    log = await items(agent_client, session_id)
    assert [i["kind"] for i in log] == ["user_message", "assistant_message", "tool_result"]
    assert log[2]["tool_use_id"] == slow.id and log[2]["is_error"] is True
    assert log[2]["content"].startswith("interrupted by the user")
    assert_log_consistent(log)


async def test_the_turn_after_an_interrupted_tool_call_sends_a_valid_request(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    slow = tool_use("slow", {"seconds": 60})
    fake_llm.reply(slow)
    session_id = await new_session(agent_client)
    job_id = await _send(agent_client, session_id, "take your time")
    await wait_until(lambda: _logged(agent_client, session_id, slow.id))
    await _interrupt(agent_client, session_id)
    await wait_job(agent_client, job_id)

    fake_llm.reply(text("Stopped, as you asked."))
    response = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "ok?"}
    )

    assert response.status_code == 200, response.text  # the fake refuses invalid requests
    last = fake_llm.requests[-1].messages
    assert [b["type"] for b in last[-1]["content"]] == ["tool_result", "text"]
    assert last[-1]["content"][0]["is_error"] is True
    assert last[-1]["content"][1]["text"] == "ok?"


async def test_interrupt_during_the_llm_stream_aborts_it_and_appends_no_answer(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.hang(120)
    session_id = await new_session(agent_client)
    job_id = await _send(agent_client, session_id, "think hard")
    await fake_llm.wait_for_requests(1)

    await _interrupt(agent_client, session_id)

    job = await wait_job(agent_client, job_id)  # long before the hang would end
    assert job["status"] == "cancelled"
    assert job["error"]["type"] == INTERRUPTED
    assert [i["kind"] for i in await items(agent_client, session_id)] == ["user_message"]


async def test_waiting_on_an_interrupted_turn_answers_409_interrupted(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.hang(120)
    session_id = await new_session(agent_client)
    first = await _send(agent_client, session_id, "think hard")
    await fake_llm.wait_for_requests(1)
    await _interrupt(agent_client, session_id)

    fake_llm.reply(text("ok"))
    waited = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "next"}
    )
    job = await wait_job(agent_client, first)

    assert waited.status_code == 200, waited.text
    assert job["error"]["type"] == INTERRUPTED


async def test_interrupt_on_an_idle_session_is_a_409_session_idle(
    agent_client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(agent_client)

    response = await agent_client.post(f"/sessions/{session_id}/interrupt")

    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["reason"] == "session-idle"


async def test_interrupt_of_another_tenants_session_is_a_404(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(anthropic_base_url=fake_llm.url, api_keys="acme:key-a,globex:key-b")
    fake_llm.hang(120)
    async with serve(settings) as (_, client):
        acme = {"Authorization": "Bearer key-a"}
        globex = {"Authorization": "Bearer key-b"}
        session = await client.post("/sessions", json={}, headers=acme)
        session_id = session.json()["id"]
        sent = await client.post(
            f"/sessions/{session_id}/messages", json={"text": "hi"}, headers=acme
        )
        await fake_llm.wait_for_requests(1)

        response = await client.post(f"/sessions/{session_id}/interrupt", headers=globex)
        job = await client.get(f"/jobs/{sent.json()['job_id']}", headers=acme)
        await client.post(f"/sessions/{session_id}/interrupt", headers=acme)

    assert response.status_code == 404
    assert job.json()["cancel_requested"] is False


async def test_if_busy_interrupt_stops_the_turn_and_runs_the_new_message_next(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    slow = tool_use("slow", {"seconds": 60})
    fake_llm.reply(slow)
    session_id = await new_session(agent_client)
    first = await _send(agent_client, session_id, "take your time")
    await wait_until(lambda: _logged(agent_client, session_id, slow.id))
    fake_llm.reply(text("Doing the other thing."))

    second = await _send(agent_client, session_id, "do this instead", if_busy="interrupt")

    assert (await wait_job(agent_client, first))["error"]["type"] == INTERRUPTED
    assert (await wait_job(agent_client, second))["status"] == "succeeded"
    log = await items(agent_client, session_id)
    assert [i["kind"] for i in log] == [
        "user_message",
        "assistant_message",
        "tool_result",
        "user_message",
        "assistant_message",
    ]
    assert log[3]["content"] == [{"type": "text", "text": "do this instead"}]
    assert_log_consistent(log)


async def test_an_interrupt_is_a_turn_interrupted_event_and_webhook(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(anthropic_base_url=fake_llm.url, webhook_allow_private=True)
    fake_llm.hang(120)
    async with serve(settings) as (_, client):
        hook = await client.post(
            "/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["turn.interrupted"]}
        )
        session_id = await new_session(client)
        job_id = await _send(client, session_id, "think hard")
        await fake_llm.wait_for_requests(1)
        await _interrupt(client, session_id)
        await wait_job(client, job_id)
        streamed = sse_events((await client.get(f"/jobs/{job_id}/events")).text)
        deliveries = (await client.get(f"/webhooks/{hook.json()['id']}/deliveries")).json()

    events = [e for e in streamed if e["type"] == "turn.interrupted"]
    assert events == [
        {"type": "turn.interrupted", "job_id": job_id, "session_id": session_id, "turn": 1}
    ]
    sent = [{"type": d["event_type"], **d["payload"]["data"]} for d in deliveries["data"]]
    assert sent == events


SHELL_STEP = """\
name: shell-step
movements:
  - name: only
    instruction: Run the command.
    allowed_tools: [Bash]
    transitions: [COMPLETE]
"""


def _running(marker: str) -> list[int]:
    """Processes running exactly the command `marker` (its words are the argv)."""
    wanted = marker.replace(" ", "\0").encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().split()[2]
        except (OSError, IndexError):
            continue
        if cmdline == wanted and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_interrupt_during_a_bash_call_kills_its_process_group(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "shell-step.yaml").write_text(SHELL_STEP)
    settings: Settings = make_settings(
        anthropic_base_url=fake_llm.url,
        pieces_dir=pieces,
        bash_tool_enabled=True,
        job_heartbeat_seconds=0.1,
    )
    marker = "sleep 61.0357"
    command = f"echo started > output/started; {marker} & {marker}; touch output/after"
    call = tool_use("Bash", {"command": command, "timeout_seconds": 120})
    fake_llm.reply(call)
    async with serve(settings) as (_, client):
        job = await submit_job(client, piece="shell-step")
        output = workspace_of(settings, job["id"]).root / "output"

        async def started() -> bool:
            return (output / "started").exists() and len(_running(marker)) >= 2

        await wait_until(started)
        await _interrupt(client, job["session_id"])
        ended = await wait_job(client, job["id"])
        log = await items(client, job["session_id"])

    async def killed() -> bool:  # the kill is sent at once; the kernel reaps a moment later
        return not _running(marker)

    await wait_until(killed)
    assert ended["status"] == "cancelled" and ended["error"]["type"] == INTERRUPTED
    results = [i for i in log if i["kind"] == "tool_result"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [(call.id, True)]
    assert results[0]["content"].startswith("interrupted by the user")
    assert not (output / "after").exists()
