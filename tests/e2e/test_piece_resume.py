"""A piece job whose worker dies in the middle of a tool call.

The command dies with its worker, and the next worker continues the open movement from
the log: the call gets the `interrupted` result and the model goes on from there, with
the context thresholds it had already crossed still counted as fired. (Restarting the
step from its prompt would leave the first tool call without a result, while a Bash
child it started could finish its side effect anyway.)
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import StrataProcesses
from tests.e2e.sse import SSEvent, read_sse
from tests.fakes.messages_api import FakeMessagesAPI, count_tokens, tool_use
from tests.support.chat import wait_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SHELL_STEP = """\
name: shell-step
movements:
  - name: only
    instruction: Run the command.
    allowed_tools: [Bash]
    transitions: [COMPLETE]
"""
COMMAND = "echo started > output/started; sleep 30; touch output/after"


def running_commands() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if COMMAND.encode() in cmdline and b"pytest" not in cmdline:
            found.append(int(entry.name))
    return found


@dataclass
class Resumed:
    """A job whose first worker was killed in the middle of its Bash call, as it ended
    under the second worker, and the context events of its stream."""

    job: dict[str, Any]
    output: Path
    context_events: list[str]


async def kill_mid_command_and_resume(
    strata_procs: StrataProcesses, tmp_path: Path, piece: str, **env: str
) -> Resumed:
    """Worker A runs the piece's Bash call and is SIGKILLed during it; worker B resumes."""
    worker_a = strata_procs.worker("a", **env)
    api = strata_procs.serve(run_worker_in_server=False, **env)
    async with api.client() as client:
        created = await client.post("/jobs", json={"instruction": "Go.", "piece": piece})
        job_id = created.json()["id"]
        output = tmp_path / "data" / "workspaces" / job_id / "output"
        deadline = time.monotonic() + 60
        while not (output / "started").exists():
            assert time.monotonic() < deadline, strata_procs.logs()
            await asyncio.sleep(0.02)

        assert worker_a.kill() == -signal.SIGKILL
        strata_procs.worker("b", **env)
        job = await wait_job(client, job_id, seconds=90)  # a loaded machine starts B slowly
        kinds = []
        async with client.stream("GET", f"/jobs/{job_id}/events") as stream:
            async for event in read_sse(stream):  # an ended job's stream replays, then ends
                if isinstance(event, SSEvent) and event.event.startswith("context."):
                    kinds.append(event.event)
    return Resumed(job, output, kinds)


def piece_dir(tmp_path: Path, name: str, text: str) -> str:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / f"{name}.yaml").write_text(text)
    return str(pieces)


async def test_a_tool_cut_off_by_a_crash_is_interrupted_and_the_movement_goes_on(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    call = tool_use("Bash", {"command": COMMAND})
    fake_llm.reply(call)  # worker A runs the command and is killed during it
    fake_llm.reply(tool_use("transition", {"next_step": "COMPLETE", "summary": "went on"}))

    resumed = await kill_mid_command_and_resume(
        strata_procs,
        tmp_path,
        "shell-step",
        STRATA_PIECES_DIR=piece_dir(tmp_path, "shell-step", SHELL_STEP),
        STRATA_BASH_TOOL_ENABLED="true",
    )

    job = resumed.job
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2
    first, second = fake_llm.requests
    prompt = first.messages[0]["content"][0]["text"]
    assert second.messages[0]["content"][0]["text"] == prompt  # the same prompt, not a new one
    assert len(second.messages) == 3
    [result] = [b for b in second.messages[2]["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == call.id
    assert result["is_error"] is True
    assert "interrupted" in str(result["content"])
    deadline = time.monotonic() + 10
    while running_commands():
        assert time.monotonic() < deadline, "the command outlived its worker"
        await asyncio.sleep(0.05)
    assert not (resumed.output / "after").exists()


WIDE_STEP = """\
name: wide-step
system: |
  {system}
movements:
  - name: only
    instruction: Run the command.
    allowed_tools: [Bash]
    transitions: [COMPLETE]
"""


async def test_a_resumed_movement_records_each_context_threshold_once(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    """One context event per threshold per movement, a crash included: the thresholds
    a movement crossed are kept with their events, so the worker that resumes it does
    not record the 70% warning a second time."""
    window = 10_000
    system = "You follow the rules below exactly. " + "rule " * 5_700  # ~72% of the window
    fake_llm.context_window_tokens = window
    fake_llm.reply(tool_use("Bash", {"command": COMMAND}))  # worker A is killed during it
    fake_llm.reply(tool_use("transition", {"next_step": "COMPLETE", "summary": "went on"}))

    resumed = await kill_mid_command_and_resume(
        strata_procs,
        tmp_path,
        "wide-step",
        STRATA_PIECES_DIR=piece_dir(tmp_path, "wide-step", WIDE_STEP.format(system=system)),
        STRATA_BASH_TOOL_ENABLED="true",
        STRATA_CONTEXT_WINDOW_TOKENS=str(window),
    )

    assert resumed.job["status"] == "succeeded", resumed.job
    assert resumed.job["attempts"] == 2
    assert len(fake_llm.requests) == 2  # both over the 70% warning
    assert all(0.7 <= count_tokens(r.body) / window < 0.85 for r in fake_llm.requests)
    assert resumed.context_events == ["context.warn"]
