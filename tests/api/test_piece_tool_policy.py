"""Tool policies in piece jobs: a movement's calls go past the operator's, the tenant's,
the session's and the movement's own rules, and a held call waits for a person the way
a chat turn's does (actions, `waiting_human`, allow / deny / edit / respond, resume),
with the real runner and SDK against the fake Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.api.test_pieces_flow import (  # noqa: F401  (fixtures)
    piece_settings,
    result_text,
    tool_results,
    transition,
)
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import assert_log_consistent, items, new_session, submit_job, wait_status

ENDED = {"succeeded", "failed", "aborted", "cancelled"}

GUARDED = """\
name: guarded
movements:
  - name: work
    instruction: Write the report.
    allowed_tools: [Write, Read]
    transitions: [COMPLETE]
    tool_policy:
      - tool: Write
        effect: ask
        reason: a person reads what is written
      - tool: Read
        input: {path: "input/secret*"}
        effect: deny
        reason: not for the agent
"""

PARENT = """\
name: parent
movements:
  - name: split
    instruction: Split the work.
    transitions: [WAIT_SUBTASKS, COMPLETE]
"""

REPORT = {"path": "output/report.md", "content": "all good"}


@pytest.fixture
def pieces_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pieces"
    folder.mkdir()
    (folder / "guarded.yaml").write_text(GUARDED)
    (folder / "parent.yaml").write_text(PARENT)
    return folder


@pytest.fixture
async def strata(
    piece_settings: Callable[..., Settings],  # noqa: F811
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with serve(piece_settings()) as parts:
        yield parts


Strata = tuple[FastAPI, httpx.AsyncClient]


async def _waiting_job(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, call: Any, **fields: Any
) -> dict[str, Any]:
    """A guarded job whose movement asked for `call` and waits for a person."""
    fake_llm.reply(call)
    job = await submit_job(client, piece="guarded", **fields)
    return await wait_status(client, job["id"], {"waiting_human", *ENDED})


async def test_a_movement_rule_holds_a_call_as_an_action_of_the_movement_layer(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    call = tool_use("Write", REPORT)

    job = await _waiting_job(client, fake_llm, call)

    assert job["status"] == "waiting_human", job
    [action] = job["required_action"]
    assert (action["tool"], action["tool_use_id"], action["input"]) == ("Write", call.id, REPORT)
    assert action["rule"]["layer"] == "movement" and action["rule"]["index"] == 0
    assert action["rule"]["rule"]["reason"] == "a person reads what is written"
    assert len(fake_llm.requests) == 1


async def test_an_allowed_movement_call_runs_once_and_the_movement_goes_on(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    app, client = strata
    call = tool_use("Write", REPORT)
    job = await _waiting_job(client, fake_llm, call)
    fake_llm.reply(transition("COMPLETE", "the report is written"))
    [action] = job["required_action"]

    resolved = await client.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )

    assert resolved.status_code == 200, resolved.text
    ended = await wait_status(client, job["id"], ENDED)
    assert ended["status"] == "succeeded", ended
    [result] = tool_results(fake_llm.requests[-1].body)
    assert result["tool_use_id"] == call.id and not result.get("is_error")
    settings = app.state.runtime.settings
    assert (workspace_of(settings, job["id"]).root / "output/report.md").read_text() == "all good"
    assert_log_consistent(await items(client, job["session_id"]))


async def test_a_denied_movement_call_answers_the_model_the_reason(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    call = tool_use("Write", REPORT)
    job = await _waiting_job(client, fake_llm, call)
    fake_llm.reply(transition("COMPLETE", "nothing written"))

    await client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "deny", "reason": "not this file"},
    )

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    [result] = tool_results(fake_llm.requests[-1].body)
    assert result["is_error"] is True and "not this file" in result_text(result)


async def test_an_edited_movement_call_runs_with_the_new_input(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    app, client = strata
    job = await _waiting_job(client, fake_llm, tool_use("Write", REPORT))
    fake_llm.reply(transition("COMPLETE", "written"))
    edited = {"path": "output/report.md", "content": "edited by a person"}

    await client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "edit", "input": edited},
    )

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    root = workspace_of(app.state.runtime.settings, job["id"]).root
    assert (root / "output/report.md").read_text() == "edited by a person"


async def test_a_responded_movement_call_carries_the_content_and_never_runs(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    app, client = strata
    call = tool_use("Write", REPORT)
    job = await _waiting_job(client, fake_llm, call)
    fake_llm.reply(transition("COMPLETE", "done"))

    await client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "respond", "content": "written by hand"},
    )

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    [result] = tool_results(fake_llm.requests[-1].body)
    assert result_text(result) == "written by hand" and not result.get("is_error")
    root = workspace_of(app.state.runtime.settings, job["id"]).root
    assert not (root / "output/report.md").exists()


async def test_a_movement_deny_rule_refuses_the_call_without_a_wait(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(tool_use("Read", {"path": "input/secret.txt"}))
    fake_llm.reply(transition("COMPLETE", "could not read it"))

    job = await submit_job(client, piece="guarded")

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    [result] = tool_results(fake_llm.requests[-1].body)
    assert result["is_error"] is True and "not for the agent" in result_text(result)
    assert "movement tool policy" in result_text(result)


async def test_the_session_rules_bind_the_movements_of_its_jobs(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    session_id = await new_session(
        client, tool_policy=[{"tool": "Write", "effect": "deny", "reason": "read-only session"}]
    )
    fake_llm.reply(tool_use("Write", REPORT))
    fake_llm.reply(transition("COMPLETE", "denied"))

    job = await submit_job(client, piece="guarded", session_id=session_id)

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    [result] = tool_results(fake_llm.requests[-1].body)
    assert result["is_error"] is True and "read-only session" in result_text(result)


async def test_a_waiting_movement_gives_the_chat_its_segment_back_and_takes_its_own_again(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    session_id = await new_session(client)
    fake_llm.reply(text("Hello."))
    chat = await client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})
    await wait_status(client, chat.json()["job_id"], ENDED)
    job = await _waiting_job(client, fake_llm, tool_use("Write", REPORT), session_id=session_id)
    fake_llm.reply(text("Still here."))

    turn = await client.post(f"/sessions/{session_id}/messages", json={"text": "still there?"})
    await wait_status(client, turn.json()["job_id"], ENDED)
    chat_request = fake_llm.requests[-1].body
    fake_llm.reply(transition("COMPLETE", "written"))
    await client.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}", json={"decision": "allow"}
    )

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    said = [m["content"] for m in chat_request["messages"] if m["role"] == "user"]
    assert len(said) == 2 and "Write the report" not in str(chat_request["messages"])
    [result] = tool_results(fake_llm.requests[-1].body)
    assert not result.get("is_error")


async def test_a_comment_does_not_resume_a_movement_holding_calls(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    job = await _waiting_job(client, fake_llm, tool_use("Write", REPORT))

    posted = await client.post(f"/jobs/{job['id']}/comments", json={"body": "go on"})

    assert posted.status_code == 201, posted.text
    shown = (await client.get(f"/jobs/{job['id']}")).json()
    assert shown["status"] == "waiting_human" and len(shown["required_action"]) == 1


async def test_a_cancelled_waiting_movement_closes_its_held_calls_in_its_own_segment(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    session_id = await new_session(client)
    call = tool_use("Write", REPORT)
    job = await _waiting_job(client, fake_llm, call, session_id=session_id)

    cancelled = await client.post(f"/jobs/{job['id']}/cancel")

    assert cancelled.status_code == 200, cancelled.text
    [action] = (await client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert action["status"] == "cancelled"
    log = await items(client, session_id)
    assert_log_consistent(log)
    [use] = [i for i in log if i["kind"] == "assistant_message"]
    [result] = [i for i in log if i["kind"] == "tool_result"]
    assert result["segment"] == use["segment"]


async def test_a_subtask_runs_under_its_parent_session_rules(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    session_id = await new_session(
        client, tool_policy=[{"tool": "Write", "effect": "deny", "reason": "read-only session"}]
    )
    spawn = tool_use("spawn_subtask", {"instruction": "Write it.", "piece": "guarded"})
    fake_llm.reply(spawn, transition("WAIT_SUBTASKS", "split"))
    fake_llm.reply(tool_use("Write", REPORT))
    fake_llm.reply(transition("COMPLETE", "denied"))
    fake_llm.reply(transition("COMPLETE", "all done"))

    job = await submit_job(client, piece="parent", session_id=session_id)

    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    child_results = tool_results(fake_llm.requests[2].body)
    assert [r["is_error"] for r in child_results] == [True]
    assert "read-only session" in result_text(child_results[0])


PICK_FILE = {
    "name": "pick_file",
    "description": "Ask the user to pick a file; answers its path.",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


async def test_a_jobs_client_tool_is_offered_in_its_movements_and_respond_answers_it(
    strata: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    call = tool_use("pick_file", {"prompt": "which?"})
    job = await _waiting_job(client, fake_llm, call, client_tools=[PICK_FILE])
    [action] = job["required_action"]
    fake_llm.reply(transition("COMPLETE", "picked a.txt"))

    allowed = await client.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )
    answered = await client.post(
        f"/jobs/{job['id']}/actions/{action['id']}",
        json={"decision": "respond", "content": "a.txt"},
    )

    assert (action["kind"], allowed.status_code, answered.status_code) == ("client_tool", 422, 200)
    assert (await wait_status(client, job["id"], ENDED))["status"] == "succeeded"
    assert "pick_file" in {tool["name"] for tool in fake_llm.requests[0].body["tools"]}
    [result] = tool_results(fake_llm.requests[-1].body)
    assert (result["tool_use_id"], result_text(result)) == (call.id, "a.txt")


async def test_a_jobs_client_tool_named_like_a_server_tool_is_a_422(strata: Strata) -> None:
    _, client = strata

    refused = await client.post(
        "/jobs",
        json={
            "instruction": "x",
            "piece": "guarded",
            "client_tools": [{**PICK_FILE, "name": "transition"}],
        },
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "client_tools[0].name"
