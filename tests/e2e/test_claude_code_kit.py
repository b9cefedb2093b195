"""The Claude Code kit as its README installs it, run exactly as Claude Code runs it.

`strata claude-code install --user` into an isolated HOME; then every hook is the command
line from the installed settings.json, run by a shell with the payload on stdin and the
settings' `env` (plus what Claude Code adds: CLAUDE_PROJECT_DIR, CLAUDE_ENV_FILE for
SessionStart); `/sc-detail` is the ```! block of the installed command file with `$ARGUMENTS`
put in as Claude Code puts it (the text as typed), run after sourcing the session's env file,
as Claude Code runs a command's shell blocks. All against a real `strata serve`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code import wait_for_turns
from tests.e2e.conftest import REPO_ROOT, StrataProcesses, StrataServer
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply
from tests.support.memory import Transcript

PROJECT = "/work/kit-project"
T0 = datetime(2026, 4, 16, 9, 0, tzinfo=UTC)


class Kit:
    """The kit installed in a HOME, and Claude Code's way of running it."""

    def __init__(self, home: Path, server: StrataServer) -> None:
        self.home = home
        self.server = server
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))}
        env.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT))
        command = [sys.executable, "-m", "app.cli", "claude-code", "install", "--user"]
        subprocess.run([*command, "--url", server.url], env=env, check=True, timeout=60)
        self.settings = json.loads((home / ".claude" / "settings.json").read_text())
        self.env = {"PATH": os.environ["PATH"], "HOME": str(home), **self.settings["env"]}

    def hook(self, event: str, payload: dict[str, Any], env_file: Path | None = None) -> str:
        [group] = self.settings["hooks"][event]
        [handler] = group["hooks"]
        env = {**self.env, "CLAUDE_PROJECT_DIR": PROJECT}
        if env_file is not None:
            env["CLAUDE_ENV_FILE"] = str(env_file)
        done = subprocess.run(
            ["bash", "-c", handler["command"]],
            input=json.dumps({**payload, "hook_event_name": event}),
            env=env,
            capture_output=True,
            text=True,
            timeout=handler["timeout"],
            check=False,
        )
        assert done.returncode == 0 and not done.stderr, done.stderr
        return done.stdout

    def sc_detail(self, arguments: str, env_file: Path) -> str:
        command = (self.home / ".claude" / "commands" / "sc-detail.md").read_text()
        [block] = re.findall(r"```!\s*\n?([\s\S]*?)\n?```", command)
        shell = f"source {env_file}\n{block.replace('$ARGUMENTS', arguments)}"
        done = subprocess.run(
            ["bash", "-c", shell], env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def _session(n: int) -> str:
    return f"0000000{n}-cc00-4000-8000-00000000000{n}"


def _transcript(home: Path, n: int) -> tuple[Path, Transcript]:
    transcript = Transcript(_session(n), cwd=PROJECT)
    start = T0 + timedelta(hours=n)
    for t in range(3):
        at = start + timedelta(minutes=t)
        output = f"output of session {n} turn {t}"
        transcript.turn(at, f"s{n} t{t} question", f"s{n} t{t} answer", tool=("Bash", {}, output))
    path = home / ".claude" / "projects" / "-work-kit-project" / f"{_session(n)}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript.text())
    return path, transcript


def _summary(body: dict[str, Any]) -> Step:
    """The summary model: a line naming the turn it was given."""
    found = re.search(r"s\d t\d question", json.dumps(body["messages"]))
    return reply(f"summary of {found.group(0) if found else 'a turn'}")


@pytest.fixture
def kit(strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path) -> Kit:
    fake_llm.always(_summary)  # older turns get their L1 while the sessions go on
    home = tmp_path / "home"
    home.mkdir()
    return Kit(home, strata_procs.serve())


def test_eight_sessions_of_one_project_keep_one_chain_with_a_session_start_missing(
    kit: Kit, tmp_path: Path
) -> None:
    contexts: dict[int, str] = {}
    env_files: dict[int, Path] = {}
    for n in range(1, 9):
        path, _ = _transcript(kit.home, n)
        payload = {"session_id": _session(n), "transcript_path": str(path), "cwd": PROJECT}
        env_files[n] = tmp_path / f"env-{n}.sh"
        env_files[n].touch()
        if n != 5:  # session 5's SessionStart never reached Strata (server down, say)
            answer = json.loads(
                kit.hook("SessionStart", {**payload, "source": "startup"}, env_files[n])
            )
            contexts[n] = answer["hookSpecificOutput"]["additionalContext"]
        stop = {**payload, "stop_hook_active": False, "permission_mode": "default"}
        assert kit.hook("Stop", stop) == ""  # handed to a detached delivery
        wait_for_turns(kit.server, _session(n), 6)

    assert contexts[1] == ""
    last = contexts[8]
    assert len(last) <= 9_500
    for n in range(1, 8):  # session 5 included, and every session before it
        assert f"s{n} t2 question" in last, n
    assert "call `mcp__strata__memory_detail` with time" in last.splitlines()[-1]
    assert "s5 t2 question" in contexts[6] and "s4 t2 question" in contexts[6]

    stamp = (T0 + timedelta(hours=1, minutes=2)).strftime("%H:%M:%S")
    lines = [line for line in last.splitlines() if line.startswith(f"[{stamp}] ")]
    assert lines and "s1 t2 question" in lines[0]
    shown = kit.sc_detail(stamp, env_files[8])

    assert "- Bash (toolu_" in shown and "output of session 1 turn 2" in shown
    assert shown.rstrip().splitlines()[-1] == "— page 1 of 1: the end of these details."


def test_sc_detail_pages_and_filters_as_its_closing_line_says(kit: Kit, tmp_path: Path) -> None:
    path = kit.home / ".claude" / "projects" / "-work-kit-project" / f"{_session(1)}.jsonl"
    path.parent.mkdir(parents=True)
    transcript = Transcript(_session(1), cwd=PROJECT)
    log = "".join(f"{i:05d} compiled src/module_{i}.py\n" for i in range(3_000))
    transcript.turn(T0, "build it", "Built.", tool=("Bash", {"command": "make"}, log))
    path.write_text(transcript.text())
    payload = {"session_id": _session(1), "transcript_path": str(path), "cwd": PROJECT}
    kit.hook("Stop", payload)
    wait_for_turns(kit.server, _session(1), 1)
    env_file = tmp_path / "env.sh"
    env_file.touch()
    kit.hook("SessionStart", {**payload, "session_id": _session(2), "source": "startup"}, env_file)

    first = kit.sc_detail("09:00:00", env_file)
    second = kit.sc_detail("09:00:00 --page 2", env_file)
    grepped = kit.sc_detail("09:00:00 --kind tool_output --grep module_2999.py", env_file)

    assert len(first) <= 8_000 and len(second) <= 8_000
    closing = first.rstrip().splitlines()[-1]
    assert closing.startswith("— page 1 of ") and "`/sc-detail 09:00:00 --page 2`" in closing
    assert "--kind tool_output" in closing and "--grep TEXT" in closing
    assert "(continued)" in second
    assert "L3000: 02999 compiled src/module_2999.py" in grepped
    assert grepped.rstrip().splitlines()[-1] == "— page 1 of 1: the end of these details."


def test_sc_detail_takes_arguments_with_an_apostrophe_as_typed(kit: Kit, tmp_path: Path) -> None:
    path = kit.home / ".claude" / "projects" / "-work-kit-project" / f"{_session(1)}.jsonl"
    path.parent.mkdir(parents=True)
    transcript = Transcript(_session(1), cwd=PROJECT)
    transcript.turn(T0, "Why doesn't it build?", "It's the lock file.", tool=("Bash", {}, "ok"))
    path.write_text(transcript.text())
    payload = {"session_id": _session(1), "transcript_path": str(path), "cwd": PROJECT}
    kit.hook("Stop", payload)
    wait_for_turns(kit.server, _session(1), 1)
    env_file = tmp_path / "env.sh"
    env_file.touch()
    kit.hook("SessionStart", {**payload, "session_id": _session(2), "source": "startup"}, env_file)

    shown = kit.sc_detail("09:00:00 --grep doesn't it", env_file)

    assert "Why doesn't it build?" in shown and "It's the lock file." not in shown
    assert shown.rstrip().splitlines()[-1] == "— page 1 of 1: the end of these details."
