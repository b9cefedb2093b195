"""MCP servers attached to piece jobs (`POST /jobs` `mcp`) and to movements (their YAML's
`mcp`), their calls under the tool policy, and the stdio process a job starts on first
use, one for the whole job, killed with its process group when the job ends (a chat
turn's too)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, ToolUse, text, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job, wait_job, wait_status, wait_until
from tests.support.mcp import last_result, mcp_settings, say, servers_file
from tests.support.settings import MakeSettings

PIECES = {
    "bare": """\
name: bare
description: one step offering no MCP tool of its own
movements:
  - name: only
    instruction: Do it, then complete.
    allowed_tools: [Read]
    transitions: [COMPLETE]
""",
    "timed": """\
name: timed
description: one step that attaches the time server itself
movements:
  - name: only
    instruction: Tell the time, then complete.
    mcp: [{server: time}]
    transitions: [COMPLETE]
""",
    "twice": """\
name: twice
description: two steps, each attaching the fault server
movements:
  - name: first
    instruction: Ask for the pids.
    mcp: [{server: faults, tools: [pids]}]
    transitions: [second]
  - name: second
    instruction: Ask for the pids again.
    mcp: [{server: faults, tools: [pids]}]
    transitions: [COMPLETE]
""",
}
ALLOW_PIDS = [{"tool": "mcp__faults__pids", "effect": "allow"}]


@pytest.fixture
async def api(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    for name, body in PIECES.items():
        (pieces / f"{name}.yaml").write_text(body, encoding="utf-8")
    settings = mcp_settings(
        make_settings,
        fake_llm,
        servers_file(tmp_path),
        pieces_dir=pieces,
        job_heartbeat_seconds=0.1,
        job_lease_seconds=30.0,
        # the servers' pids are the host's, not a sandbox's own
        bash_sandbox="none",
    )
    async with serve(settings) as (_, client):
        yield client


def complete(summary: str = "done") -> ToolUse:
    return tool_use("transition", {"next_step": "COMPLETE", "summary": summary})


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def pids_of(result: dict[str, object]) -> list[int]:
    content = result["content"]
    words = content if isinstance(content, str) else json.dumps(content)
    return [int(w) for w in words.replace('"', " ").split() if w.isdigit()]


async def test_a_jobs_own_server_is_offered_in_its_movements(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__read_clock", {}))
    fake_llm.reply(complete())

    job = await submit_job(api, piece="bare", mcp=[{"server": "faults", "tools": ["read_*"]}])
    ended = await wait_job(api, job["id"], seconds=120)

    assert ended["status"] == "succeeded", ended
    assert ended["mcp"] == [{"server": "faults", "tools": ["read_*"]}]
    offered = [t["name"] for t in fake_llm.requests[0].body["tools"]]
    assert "mcp__faults__read_clock" in offered and "mcp__faults__echo" not in offered
    assert "12:00" in json.dumps(last_result(fake_llm)["content"])


async def test_a_job_naming_an_unknown_server_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/jobs", json={"instruction": "x", "piece": "bare", "mcp": [{"server": "nobody"}]}
    )
    assert response.status_code == 422, response.text


async def test_a_movement_attaches_a_server_in_its_yaml(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__time__get_current_time", {"timezone": "UTC"}))
    fake_llm.reply(complete())

    job = await submit_job(api, piece="timed")
    ended = await wait_job(api, job["id"], seconds=120)

    assert ended["status"] == "succeeded", ended
    result = last_result(fake_llm)
    assert "UTC" in json.dumps(result["content"]) and not result.get("is_error")


async def test_a_movement_holds_an_mcp_call_its_policy_asks_about_until_it_is_allowed(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__echo", {"text": "hi"}))
    fake_llm.reply(complete())

    job = await submit_job(api, piece="bare", mcp=[{"server": "faults", "tools": ["echo"]}])
    waiting = await wait_status(api, job["id"], {"waiting_human"}, seconds=120)
    [action] = waiting["required_action"]
    assert action["tool"] == "mcp__faults__echo"
    answered = await api.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )
    assert answered.status_code == 200, answered.text
    ended = await wait_job(api, job["id"], seconds=120)

    assert ended["status"] == "succeeded", ended
    result = last_result(fake_llm)
    assert result.get("is_error") is not True and "hi" in json.dumps(result["content"])


async def test_a_jobs_stdio_server_is_one_process_killed_with_its_group_at_the_end(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__pids", {}))
    fake_llm.reply(tool_use("transition", {"next_step": "second", "summary": "asked"}))
    fake_llm.reply(tool_use("mcp__faults__pids", {}))
    fake_llm.reply(complete())
    session_id = await new_session(api, tool_policy=ALLOW_PIDS)

    job = await submit_job(api, piece="twice", session_id=session_id)
    ended = await wait_job(api, job["id"], seconds=120)

    assert ended["status"] == "succeeded", ended
    first = pids_of(fake_llm.requests[1].body["messages"][-1]["content"][0])
    second = pids_of(fake_llm.requests[3].body["messages"][-1]["content"][0])
    assert first[0] == second[0]  # one server process for both movements
    await wait_until(_dead(first[0], first[1], second[1]))


async def test_a_chat_turns_stdio_server_is_killed_with_its_group_when_its_job_ends(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__pids", {}))
    fake_llm.reply(text("Noted."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_PIDS)

    reply = await say(api, session_id, "pids?")

    assert reply["job"]["status"] == "succeeded"
    server, sleeper = pids_of(last_result(fake_llm))
    await wait_until(_dead(server, sleeper))


def _dead(*pids: int) -> Callable[[], Awaitable[bool]]:
    async def dead() -> bool:
        return not any(alive(pid) for pid in pids)

    return dead
