"""MCP tools under the tool policies: each tool's default is its own. A trusted server's
tool that declares `readOnlyHint` runs unasked; any other MCP tool (mutating, or of an
untrusted server) waits for a person. The servers are real: mcp-server-git (read-only and
mutating tools) and the suite's fault server, as the operator's stdio servers."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session, wait_job, wait_status
from tests.support.mcp import last_result, mcp_settings, say, servers_file
from tests.support.settings import MakeSettings


@pytest.fixture
async def api(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    settings = mcp_settings(
        make_settings,
        fake_llm,
        servers_file(tmp_path),
        job_heartbeat_seconds=0.1,
        job_lease_seconds=30.0,
        # the repository lies outside the job's folder: writable only unconfined
        bash_sandbox="none",
    )
    async with serve(settings) as (_, client):
        yield client


def staged(tmp_path: Path) -> list[str]:
    """The files staged in the test's repository."""
    found = subprocess.run(
        ["git", "diff", "--cached", "--name-only"],
        cwd=tmp_path / "repo",
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.split()


async def asked(client: httpx.AsyncClient, session_id: str, words: str) -> dict[str, Any]:
    """Send `words`; the job once it waits for a person."""
    sent = await client.post(f"/sessions/{session_id}/messages", json={"text": words})
    assert sent.status_code == 202, sent.text
    return await wait_status(client, sent.json()["job_id"], {"waiting_human"}, seconds=60)


async def test_a_trusted_servers_read_only_tool_runs_unasked(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_llm.reply(tool_use("mcp__git__git_status", {"repo_path": str(tmp_path / "repo")}))
    fake_llm.reply(text("One file is untracked."))
    session_id = await new_session(api, mcp=[{"server": "git"}])

    reply = await say(api, session_id, "what is the state of the repository?")

    assert reply["job"]["status"] == "succeeded"
    assert "new.txt" in str(last_result(fake_llm)["content"])


async def test_a_trusted_servers_mutating_tool_asks_and_runs_once_allowed(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    call = tool_use(
        "mcp__git__git_add", {"repo_path": str(tmp_path / "repo"), "files": ["new.txt"]}
    )
    fake_llm.reply(call)
    session_id = await new_session(api, mcp=[{"server": "git"}])

    job = await asked(api, session_id, "stage new.txt")

    [action] = job["required_action"]
    assert action["tool"] == "mcp__git__git_add" and action["rule"] is None
    assert staged(tmp_path) == []
    fake_llm.reply(text("Staged."))
    resolved = await api.post(
        f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"}
    )
    assert resolved.status_code == 200, resolved.text
    assert (await wait_job(api, job["id"], seconds=60))["status"] == "succeeded"
    assert staged(tmp_path) == ["new.txt"]
    assert not last_result(fake_llm).get("is_error")
    assert len(fake_llm.requests) == 2


async def test_a_denied_mutating_call_is_an_error_result_and_never_runs(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    call = tool_use(
        "mcp__git__git_add", {"repo_path": str(tmp_path / "repo"), "files": ["new.txt"]}
    )
    fake_llm.reply(call)
    session_id = await new_session(api, mcp=[{"server": "git"}])
    job = await asked(api, session_id, "stage new.txt")
    fake_llm.reply(text("Not staged, then."))

    await api.post(
        f"/jobs/{job['id']}/actions/{job['required_action'][0]['id']}",
        json={"decision": "deny", "reason": "not now"},
    )

    assert (await wait_job(api, job["id"], seconds=60))["status"] == "succeeded"
    result = last_result(fake_llm)
    assert result["is_error"] is True and "not now" in str(result["content"])
    assert staged(tmp_path) == []


async def test_an_untrusted_server_attaches_and_its_read_only_tool_asks(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__wary__read_clock", {}))
    session_id = await new_session(api, mcp=[{"server": "wary"}])

    job = await asked(api, session_id, "what does the clock say?")

    assert [a["tool"] for a in job["required_action"]] == ["mcp__wary__read_clock"]


async def test_session_tools_show_each_mcp_tools_default(api: httpx.AsyncClient) -> None:
    session_id = await new_session(
        api, mcp=[{"server": "git", "tools": ["git_status", "git_add"]}, {"server": "wary"}]
    )

    response = await api.get(f"/sessions/{session_id}/tools")

    assert response.status_code == 200, response.text
    tools = {t["name"]: t for t in response.json()["data"]}
    status, add = tools["mcp__git__git_status"], tools["mcp__git__git_add"]
    assert status["server"] == "git" and tools["TaskList"]["server"] is None
    assert (status["policy"]["effect"], status["policy"]["default"]) == ("allow", "mcp_read_only")
    assert (add["policy"]["effect"], add["policy"]["default"]) == ("ask", "mcp_not_read_only")
    clock = tools["mcp__wary__read_clock"]["policy"]
    assert (clock["effect"], clock["default"]) == ("ask", "mcp_untrusted")


async def test_the_check_says_which_default_decides_an_mcp_call(api: httpx.AsyncClient) -> None:
    session_id = await new_session(api, mcp=[{"server": "git"}])

    checked = await api.post(
        f"/sessions/{session_id}/tool-policy/check", json={"tool": "mcp__git__git_log"}
    )
    unknown = await api.post(
        f"/sessions/{session_id}/tool-policy/check", json={"tool": "mcp__git__nothing"}
    )

    assert checked.status_code == 200, checked.text
    assert checked.json() | {"rule": None} == {
        "effect": "allow",
        "layer": None,
        "index": None,
        "rule": None,
        "by_default": True,
        "default": "mcp_read_only",
    }
    assert (unknown.json()["effect"], unknown.json()["default"]) == ("ask", "not_offered")
