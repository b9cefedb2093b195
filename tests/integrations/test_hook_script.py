"""integrations/claude-code: the hook script run as Claude Code runs it, and the plugin's files.
The script talks to a tiny local HTTP server that records what it gets. Stop and SubagentStop
hand their post to a detached process and return at once, so their tests wait for the post."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

INTEGRATION = Path(__file__).resolve().parents[2] / "integrations" / "claude-code"
SCRIPT = INTEGRATION / "scripts" / "strata-hook.py"
DELIVERED_WITHIN = 30.0
MEMORY = "## Strata: session memory\n[14:23:05] [user]: hello"
SESSION_START_ANSWER = {
    "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": MEMORY}
}


@dataclass
class Recorder:
    url: str
    posts: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, _, body in self.posts]

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        """The bodies once `count` posts have arrived (bounded wait)."""
        deadline = time.monotonic() + DELIVERED_WITHIN
        while len(self.posts) < count:
            assert time.monotonic() < deadline, f"{len(self.posts)} posts, expected {count}"
            time.sleep(0.02)
        return self.bodies


@pytest.fixture
def strata() -> Iterator[Recorder]:
    """A stand-in Strata: records POST bodies, answers SessionStart with a memory block."""
    recorder = Recorder(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            recorder.posts.append((self.path, dict(self.headers), body))
            answer = SESSION_START_ANSWER if body.get("hook_event_name") == "SessionStart" else {}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Strata-Session", "ses_recorded")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def run_hook(
    payload: dict[str, Any],
    *,
    url: str,
    state: Path,
    key: str | None = None,
    env_file: Path | None = None,
    script: Path = SCRIPT,
    home: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "CLAUDE_"))}
    env.update(STRATA_URL=url, STRATA_HOOK_STATE=str(state))
    if home is not None:
        env["HOME"] = str(home)
    if key is not None:
        env["STRATA_API_KEY"] = key
    if env_file is not None:
        env["CLAUDE_ENV_FILE"] = str(env_file)
    return subprocess.run(
        [sys.executable, str(script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def entry(n: int, content: str | None = None) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": f"u-{n}",
            "timestamp": f"2026-04-16T14:23:{n:02d}Z",
            "message": {"role": "user", "content": content or f"line {n}"},
        },
        ensure_ascii=False,
    )


def stop_payload(transcript: Path, event: str = "Stop") -> dict[str, Any]:
    return {
        "session_id": "abc123",
        "transcript_path": str(transcript),
        "cwd": "/Users/u/proj",
        "permission_mode": "default",
        "hook_event_name": event,
        "stop_hook_active": False,
    }


def lines_of(body: dict[str, Any]) -> list[str]:
    return str(body["transcript"]).splitlines()


def test_session_start_prints_strata_s_answer(strata: Recorder, tmp_path: Path) -> None:
    payload = {
        "session_id": "abc123",
        "transcript_path": "/Users/u/.claude/projects/-Users-u-proj/abc123.jsonl",
        "cwd": "/Users/u/proj",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }

    env_file = tmp_path / "session-env.sh"

    done = run_hook(
        payload, url=strata.url, state=tmp_path / "state", key="sk-test", env_file=env_file
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == SESSION_START_ANSWER
    [(path, headers, body)] = strata.posts
    assert path == "/hooks/claude-code"
    assert body == {**payload, "kit_mode": "plugin", "kit_mcp": True}  # the plugin's script
    assert headers["Authorization"] == "Bearer sk-test"
    # Claude Code sources it before the session's shell commands: /sc-detail finds its session
    assert env_file.read_text() == "export STRATA_SESSION_ID=ses_recorded\n"


def test_stop_posts_only_the_lines_written_since_the_last_call(
    strata: Recorder, tmp_path: Path
) -> None:
    transcript = tmp_path / "abc123.jsonl"
    transcript.write_text("".join(entry(n) + "\n" for n in (1, 2, 3)))
    state = tmp_path / "state"

    first = run_hook(stop_payload(transcript), url=strata.url, state=state)
    strata.wait_for(1)
    with transcript.open("a") as f:
        f.write(entry(4) + "\n" + entry(5) + "\n")
    second = run_hook(stop_payload(transcript), url=strata.url, state=state)
    strata.wait_for(2)
    third = run_hook(stop_payload(transcript), url=strata.url, state=state)
    fourth = run_hook(stop_payload(transcript, "SubagentStop"), url=strata.url, state=state)
    with transcript.open("a") as f:
        f.write(entry(6) + "\n")
    run_hook(stop_payload(transcript), url=strata.url, state=state)

    # a post after the third and fourth calls: they had nothing new, and waited their turn
    *_, last = strata.wait_for(3)
    assert {d.returncode for d in (first, second, third, fourth)} == {0}
    assert lines_of(last) == [entry(6)]
    one, two, _ = strata.bodies
    assert lines_of(one) == [entry(1), entry(2), entry(3)]
    assert one["transcript_first_line"] == 1
    assert lines_of(two) == [entry(4), entry(5)]
    assert two["transcript_first_line"] == 4
    assert two["hook_event_name"] == "Stop" and two["session_id"] == "abc123"
    assert any(state.iterdir())  # progress is kept under STRATA_HOOK_STATE


def test_a_partially_written_last_line_is_held_back(strata: Recorder, tmp_path: Path) -> None:
    transcript = tmp_path / "abc123.jsonl"
    partial = entry(3)[:25]
    transcript.write_text(entry(1) + "\n" + entry(2) + "\n" + partial)
    state = tmp_path / "state"

    run_hook(stop_payload(transcript), url=strata.url, state=state)
    strata.wait_for(1)
    transcript.write_text(entry(1) + "\n" + entry(2) + "\n" + entry(3) + "\n")
    run_hook(stop_payload(transcript), url=strata.url, state=state)

    one, two = strata.wait_for(2)
    assert lines_of(one) == [entry(1), entry(2)]
    assert lines_of(two) == [entry(3)]
    assert two["transcript_first_line"] == 3


def test_a_partial_line_with_a_unicode_line_separator_is_held_back_whole(
    strata: Recorder, tmp_path: Path
) -> None:
    # JSON allows U+2028 raw inside strings (JSON.stringify, which writes the transcripts,
    # leaves it raw): it is not a line
    # end of the JSONL file, so it must neither split a line nor let a fragment through.
    line = entry(2, "first\u2028second\u2029third\x85fourth")
    assert "\u2028" in line
    transcript = tmp_path / "abc123.jsonl"
    transcript.write_text(entry(1) + "\n" + line[: line.index("second") + 3], encoding="utf-8")
    state = tmp_path / "state"

    run_hook(stop_payload(transcript), url=strata.url, state=state)
    strata.wait_for(1)
    transcript.write_text(entry(1) + "\n" + line + "\n" + entry(3) + "\n", encoding="utf-8")
    run_hook(stop_payload(transcript), url=strata.url, state=state)

    one, two = strata.wait_for(2)
    assert one["transcript"] == entry(1) + "\n"
    assert two["transcript"] == line + "\n" + entry(3) + "\n"
    assert two["transcript_first_line"] == 2


def test_subagent_stop_posts_the_agent_transcript(strata: Recorder, tmp_path: Path) -> None:
    main = tmp_path / "abc123.jsonl"
    main.write_text(entry(1) + "\n")
    agent = tmp_path / "agent-def456.jsonl"
    agent.write_text(entry(7, "Warmup") + "\n")
    payload = {**stop_payload(main, "SubagentStop"), "agent_transcript_path": str(agent)}

    done = run_hook(payload, url=strata.url, state=tmp_path / "state")

    assert done.returncode == 0, done.stderr
    [body] = strata.wait_for(1)
    assert lines_of(body) == [entry(7, "Warmup")]


def test_other_events_post_nothing(strata: Recorder, tmp_path: Path) -> None:
    payload = {"session_id": "abc123", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}

    done = run_hook(payload, url=strata.url, state=tmp_path / "state")

    assert (done.returncode, done.stdout, strata.posts) == (0, "", [])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_that_is_down_never_blocks_claude_code(strata: Recorder, tmp_path: Path) -> None:
    transcript = tmp_path / "abc123.jsonl"
    transcript.write_text(entry(1) + "\n")
    state = tmp_path / "state"
    down = f"http://127.0.0.1:{_closed_port()}"
    start = {"session_id": "abc123", "hook_event_name": "SessionStart", "source": "startup"}

    failed_start = run_hook(start, url=down, state=state)
    failed_stop = run_hook(stop_payload(transcript), url=down, state=state)
    later = run_hook(stop_payload(transcript), url=strata.url, state=state)

    assert failed_start.returncode == 0
    assert failed_start.stdout == ""
    assert failed_start.stderr.startswith("strata-hook:")
    assert (failed_stop.returncode, failed_stop.stdout, failed_stop.stderr) == (0, "", "")
    assert later.returncode == 0
    # the lines the failed delivery did not deliver are sent by the next one
    [body] = strata.wait_for(1)
    assert lines_of(body) == [entry(1)]
    assert "URLError" in (state / "delivery.log").read_text()


def test_the_plugin_runs_its_hooks_as_commands_that_do_not_hold_claude_code() -> None:
    plugin = json.loads((INTEGRATION / ".claude-plugin" / "plugin.json").read_text())
    hooks = json.loads((INTEGRATION / "hooks" / "hooks.json").read_text())["hooks"]

    assert plugin["name"] == "strata"
    command = 'python3 "${CLAUDE_PLUGIN_ROOT}/scripts/strata-hook.py"'
    for event in ("SessionStart", "Stop", "SubagentStop"):
        [handler] = [h for group in hooks[event] for h in group["hooks"]]
        assert handler["type"] == "command" and handler["command"] == command
        # `async: true` was killed when `claude -p` exited: the script returns at once itself
        assert "async" not in handler
        assert handler["timeout"] <= 20


def test_the_sc_detail_command_passes_its_arguments_on_stdin_not_on_a_shell_line() -> None:
    text = (INTEGRATION / "commands" / "sc-detail.md").read_text()
    front, body = text.split("---\n", 2)[1:]

    fields = dict(line.split(": ", 1) for line in front.strip().splitlines())
    assert fields["allowed-tools"] == "Bash(python3:*)"  # Claude can run it, not only the user
    assert "/sc-detail 14:23:05" in fields["description"]
    assert "--page" in fields["argument-hint"] and "--grep" in fields["argument-hint"]
    assert (
        "```!\n"
        'python3 "${CLAUDE_PLUGIN_ROOT}/scripts/strata-hook.py" detail '
        "<<'STRATA_SC_DETAIL_ARGUMENTS'\n"
        "$ARGUMENTS\n"
        "STRATA_SC_DETAIL_ARGUMENTS\n"
        "```\n"
    ) in body
    assert body.count("$ARGUMENTS") == 1  # nowhere else, where a `!` could run what it holds


def test_the_plugin_registers_strata_s_mcp_server_over_http_with_the_key_from_the_environment() -> (
    None
):
    servers = json.loads((INTEGRATION / ".mcp.json").read_text())["mcpServers"]

    assert servers == {
        "strata": {
            "type": "http",
            "url": "${STRATA_URL:-http://127.0.0.1:8000}/mcp",
            "headers": {"Authorization": "Bearer ${STRATA_API_KEY:-}"},
        }
    }


def _session_start(project: Path) -> dict[str, Any]:
    return {
        "session_id": "abc123",
        "cwd": str(project),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }


def _installed_copy(home: Path) -> Path:
    """The script where `strata claude-code install --user` puts it."""
    copy = home / ".claude" / "strata" / "strata-hook.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(SCRIPT.read_text())
    return copy


def test_an_installed_copy_says_settings_mode_without_the_mcp_server(
    strata: Recorder, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    copy = _installed_copy(home)

    payload = _session_start(project)
    run_hook(payload, url=strata.url, state=tmp_path / "state", script=copy, home=home)

    assert strata.bodies == [{**payload, "kit_mode": "settings", "kit_mcp": False}]


def test_an_installed_copy_finds_the_mcp_server_in_the_users_claude_json(
    strata: Recorder, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    copy = _installed_copy(home)
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"strata": {"type": "http"}}}))

    run_hook(_session_start(project), url=strata.url, state=tmp_path / "s", script=copy, home=home)

    assert strata.bodies[0]["kit_mcp"] is True


def test_an_installed_copy_finds_the_mcp_server_in_the_projects_mcp_json(
    strata: Recorder, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    copy = _installed_copy(home)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"strata": {"type": "http"}}}))

    run_hook(_session_start(project), url=strata.url, state=tmp_path / "s", script=copy, home=home)

    assert strata.bodies[0]["kit_mode"] == "settings" and strata.bodies[0]["kit_mcp"] is True


def test_mcp_headers_gives_the_key_of_the_personal_settings_beside_the_installed_copy(
    tmp_path: Path,
) -> None:
    copy = _installed_copy(tmp_path / "project")  # .claude/strata/strata-hook.py
    local = {"env": {"STRATA_API_KEY": "sk-personal"}}
    (tmp_path / "project" / ".claude" / "settings.local.json").write_text(json.dumps(local))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "CLAUDE_"))}

    done = subprocess.run(
        [sys.executable, str(copy), "mcp-headers"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"Authorization": "Bearer sk-personal"}
