"""The Claude Code kit with the real Claude Code CLI, headless, against the fake Messages API.

The CLI comes from tests/e2e/claude-code-cli/package-lock.json (a pinned version), installed by
`make test` (the `cc-cli` target runs `npm ci`), never by the test. Each `claude -p` runs in an
isolated HOME into which `strata claude-code install --user` installed the kit, against a real
`strata serve`, with Claude Code's own traffic switched off. Three sessions of one project:

1. runs a Bash tool;
2. starts with session 1's memory in its first request to the model;
3. runs `/sc-detail <time of session 1's turn>`, which brings that turn's tool output into the
   request the model gets.

And Strata's MCP server as the kit registers it, installed and as a plugin (`--plugin-dir`):
session 2's model, told the tool by its memory block, calls `memory_search` over HTTP at the
loopback server and its next request carries session 1's turn; installed, it also reads
session 1's tool output with `memory_detail` at the time its memory block shows (README's
"Claude Code in three steps", step 3).

Marked `sqlite_only`: what is tested is the kit and the CLI, not the database.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code import wait_for_turns
from tests.e2e.conftest import REPO_ROOT, StrataProcesses, StrataServer
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use

pytestmark = pytest.mark.sqlite_only

CLI = REPO_ROOT / "tests" / "e2e" / "claude-code-cli" / "node_modules" / ".bin" / "claude"
RUN_WITHIN = 180.0  # seconds for one `claude -p`; about 5 s on an idle machine
MARKER = "STRATA-MARKER-7f3a"
KEY = "sk_test_project_install_key"
PROMPT = "Please print the build marker."
KIT = REPO_ROOT / "integrations" / "claude-code"
PLUGIN_TOOLS = "mcp__plugin_strata_strata__"  # Claude Code's names of a plugin's MCP tools


def _cli() -> Path:
    if not CLI.exists():
        pytest.fail(
            f"{CLI.relative_to(REPO_ROOT)} is missing: install the pinned Claude Code CLI with "
            "`make cc-cli` (`make test` does it), i.e. `npm ci` in tests/e2e/claude-code-cli",
            pytrace=False,
        )
    return CLI


def _last_user_text(body: dict[str, Any]) -> str:
    message = body["messages"][-1]
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) + json.dumps(b.get("content", "")) for b in content)


def _answer(body: dict[str, Any]) -> Step:
    """The model: run the marker command for the first prompt, then say what it printed;
    any other request (a new session's first one, the CLI's own side requests) gets text."""
    last = _last_user_text(body)
    results = (
        [
            b
            for b in body["messages"][-1]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if isinstance(body["messages"][-1]["content"], list)
        else []
    )
    if results:
        return reply(text("The command printed the build marker."))
    if PROMPT in last and len(body["messages"]) == 1:
        return reply(tool_use("Bash", {"command": f"echo {MARKER}", "description": "marker"}))
    return reply(text("Noted."))


def _claude(
    home: Path,
    project: Path,
    fake: FakeMessagesAPI,
    prompt: str,
    *,
    allow_bash: bool = True,
    plugin_for: StrataServer | None = None,
) -> dict[str, Any]:
    """`claude -p prompt` in `project`; without `allow_bash`, a command's shell line runs only
    if its own `allowed-tools` let it (as in an interactive session that asks). With
    `plugin_for`, the kit is loaded as a plugin (`--plugin-dir`) with that server's
    `STRATA_URL` in the environment, as the kit's README says."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    flags = ["--allowedTools", "Bash"] if allow_bash else []
    if plugin_for is not None:
        env["STRATA_URL"] = plugin_for.url
        # a plugin cannot allow its tools: this is the yes a user gives when Claude Code asks
        flags += ["--plugin-dir", str(KIT), "--allowedTools", f"{PLUGIN_TOOLS}memory_search"]
    done = subprocess.run(
        [str(_cli()), "-p", prompt, "--output-format", "json", *flags],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_WITHIN,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"claude exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["is_error"] is False, result
    return result


def _install(home: Path, server: StrataServer, *where: str) -> str:
    """`strata claude-code install` into `where` (default `--user`), for this server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))}
    env.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "app.cli", "claude-code", "install"]
    done = subprocess.run(
        [*command, *(where or ["--user"]), "--url", server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _first_request_of(fake: FakeMessagesAPI, session_id: str) -> dict[str, Any]:
    for request in fake.requests:
        metadata = json.loads(request.body.get("metadata", {}).get("user_id", "{}"))
        if metadata.get("session_id") == session_id:
            return request.body
    raise AssertionError(f"no request of session {session_id}")


def test_the_kit_gives_claude_code_its_memory_and_sc_detail(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    server = strata_procs.serve()
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    installed = _install(home, server)
    assert "hooks.SessionStart" in installed and "sc-detail.md" in installed

    _three_sessions(home, project, fake_llm, server, None)


def test_a_project_install_with_a_key_works_from_its_personal_settings(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The hooks in the shared settings.json, the URL and the key only in
    settings.local.json: Claude Code merges them, and the server refuses hooks without it."""
    server = strata_procs.serve(STRATA_API_KEYS=f"acme:{KEY}")
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    installed = _install(home, server, "--project", str(project), "--api-key", KEY)
    assert KEY not in installed
    shared = (project / ".claude" / "settings.json").read_text()
    assert KEY not in shared and str(project) not in shared

    _three_sessions(home, project, fake_llm, server, KEY)


def _three_sessions(
    home: Path, project: Path, fake_llm: FakeMessagesAPI, server: StrataServer, key: str | None
) -> None:
    """A Bash call, a session that starts with its memory, and `/sc-detail` of its time."""
    fake_llm.always(_answer)

    one = _claude(home, project, fake_llm, PROMPT)
    wait_for_turns(server, one["session_id"], 2, key)
    two = _claude(home, project, fake_llm, "What did we do last time?")

    first = json.dumps(_first_request_of(fake_llm, two["session_id"]))
    assert "## Strata: session memory" in first
    assert PROMPT in first and "The command printed the build marker." in first
    assert MARKER not in first  # a tool output is L3: only a detail look-up brings it
    # the installed MCP server answered Claude Code (with the key, where the server has keys)
    assert '"name": "mcp__strata__memory_search"' in first
    stamp = re.search(r"\[(\d\d:\d\d:\d\d)\] \[user\]: " + re.escape(PROMPT), first)
    assert stamp is not None, first

    three = _claude(home, project, fake_llm, f"/sc-detail {stamp.group(1)}", allow_bash=False)

    detail = json.dumps(_first_request_of(fake_llm, three["session_id"]))
    assert re.search(r"### tool_output\\n- Bash \(toolu_\w+:result\): " + MARKER, detail), detail
    assert fake_llm.unexpected == []


SEARCH_PROMPT = "Where did we print the build marker?"


def _searching_model(tools: str) -> Any:
    """The model of the MCP tests: session 1 runs the marker command (as `_answer`); asked
    where, it calls `{tools}memory_search` for the prompt's words, then says what came back."""

    def answer(body: dict[str, Any]) -> Step:
        last = body["messages"][-1]["content"]
        if SEARCH_PROMPT in _last_user_text(body) and len(body["messages"]) == 1:
            query = {"query": "build marker"}
            return reply(tool_use(f"{tools}memory_search", query))
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results and any("memory_search" in json.dumps(m) for m in body["messages"][-2:-1]):
            return reply(text("Found it in the memory."))
        return _answer(body)

    return answer


def _tool_result_after(fake: FakeMessagesAPI, session_id: str, tool: str) -> str:
    """The tool_result the session's model got for its call of `tool`."""
    for request in fake.requests:
        metadata = json.loads(request.body.get("metadata", {}).get("user_id", "{}"))
        if metadata.get("session_id") != session_id:
            continue
        messages = request.body["messages"]
        calls = [
            b["id"]
            for m in messages
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_use" and b["name"] == tool
        ]
        for message in messages:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result" and block["tool_use_id"] in calls:
                    return json.dumps(block["content"])
    raise AssertionError(f"session {session_id} never got a result of {tool}")


def _search_from_session_two(
    home: Path, project: Path, fake: FakeMessagesAPI, server: StrataServer, tools: str
) -> str:
    """Session 1 runs a command; session 2's model is told the MCP tool and searches with
    it, and its next request carries session 1's turn. Session 2's first request."""
    fake.always(_searching_model(tools))
    plugin = server if tools == PLUGIN_TOOLS else None
    one = _claude(home, project, fake, PROMPT, plugin_for=plugin)
    wait_for_turns(server, one["session_id"], 2)

    two = _claude(home, project, fake, SEARCH_PROMPT, allow_bash=False, plugin_for=plugin)

    first = json.dumps(_first_request_of(fake, two["session_id"]))
    assert f"call `{tools}memory_detail` with time" in first
    assert f'"name": "{tools}memory_search"' in first  # Claude Code offers the tool
    found = _tool_result_after(fake, two["session_id"], f"{tools}memory_search")
    assert "print the build marker" in found, found
    assert two["result"] == "Found it in the memory."
    assert fake.unexpected == []
    return first


def test_with_the_kit_installed_the_model_searches_the_memory_through_mcp(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    server = strata_procs.serve()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    installed = _install(home, server)
    assert "mcpServers.strata" in installed

    _search_from_session_two(home, project, fake_llm, server, "mcp__strata__")


def test_the_kit_as_a_plugin_serves_its_mcp_search_and_its_namespaced_command(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    server = strata_procs.serve()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()

    first = _search_from_session_two(home, project, fake_llm, server, PLUGIN_TOOLS)

    # the plugin's command, as Claude Code names it, for people
    stamp = re.search(r"\[(\d\d:\d\d:\d\d)\] \[user\]: " + re.escape(PROMPT), first)
    assert stamp is not None, first
    command = f"/strata:sc-detail {stamp.group(1)}"
    three = _claude(home, project, fake_llm, command, allow_bash=False, plugin_for=server)
    detail = json.dumps(_first_request_of(fake_llm, three["session_id"]))
    assert re.search(r"### tool_output\\n- Bash \(toolu_\w+:result\): " + MARKER, detail), detail


DETAIL_PROMPT = "What exactly did the command print last time?"


def _detail_reading_model(body: dict[str, Any]) -> Step:
    """The model of README's third step: asked what a command printed, it calls
    `mcp__strata__memory_detail` with the time its memory block shows the command's turn
    at, then says what came back."""
    request = json.dumps(body)
    last = body["messages"][-1]["content"]
    if DETAIL_PROMPT in _last_user_text(body) and len(body["messages"]) == 1:
        stamp = re.search(r"\[(\d\d:\d\d:\d\d)\] \[user\]: " + re.escape(PROMPT), request)
        assert stamp is not None, request
        return reply(tool_use("mcp__strata__memory_detail", {"time": stamp.group(1)}))
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results and any("memory_detail" in json.dumps(m) for m in body["messages"][-2:-1]):
        return reply(text("It printed the marker."))
    return _answer(body)


def test_with_the_kit_installed_the_model_reads_a_turns_tool_output_through_mcp(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    """README's Claude Code section, step 3: the model reads a turn's tool inputs and
    outputs with `mcp__strata__memory_detail` at the time the memory shows."""
    server = strata_procs.serve()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home, server)
    fake_llm.always(_detail_reading_model)
    one = _claude(home, project, fake_llm, PROMPT)
    wait_for_turns(server, one["session_id"], 2)

    two = _claude(home, project, fake_llm, DETAIL_PROMPT, allow_bash=False)

    found = _tool_result_after(fake_llm, two["session_id"], "mcp__strata__memory_detail")
    assert MARKER in found and "tool_output" in found, found
    assert two["result"] == "It printed the marker."
    assert fake_llm.unexpected == []
