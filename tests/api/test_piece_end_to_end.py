"""A piece job from start to finish, as a user would run one.

A draft job takes an input file, then starts. Its three movements read the file and
hand the counting to a subtask, write a report after asking the user a question (answered
by a comment), and check it; the job ends with the model's own COMPLETE.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.api.test_pieces_flow import (  # noqa: F401  (fixtures)
    finish,
    piece_settings,
    pieces_dir,
    prompt_of,
    result_text,
    section,
    status_history,
    tool_results,
    transition,
)
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, tool_use
from tests.support.apps import serve
from tests.support.chat import submit_job, wait_status

THREE_STEPS = """\
name: three-steps
description: gather (with a subtask), write (asking the user), check
movements:
  - name: gather
    instruction: Read the input and hand the counting to a subtask.
    allowed_tools: [Read, Glob]
    transitions: [write, WAIT_SUBTASKS]
  - name: write
    instruction: Write output/report.md; ask the user what you cannot decide.
    allowed_tools: [Read, Write]
    transitions: [check]
  - name: check
    instruction: Check output/report.md.
    allowed_tools: [Read]
    transitions: [COMPLETE, write]
    verify: true
"""

COUNTER = """\
name: counter
movements:
  - name: count
    instruction: Count and write the count to output/count.txt.
    allowed_tools: [Read, Write]
    transitions: [COMPLETE]
"""


def last_result(body: dict[str, Any]) -> str:
    results = tool_results(body)
    return result_text(results[-1]) if results else ""


def model(body: dict[str, Any]) -> Step:
    """What the model answers, from what it was sent."""
    prompt = prompt_of(body)
    done = last_result(body)
    if "## Task\n\nCount the regions." in prompt:
        if not done:
            return reply(tool_use("Write", {"path": "output/count.txt", "content": "3 regions\n"}))
        return reply(transition("COMPLETE", "3 regions"))
    if "## Step: gather" in prompt:
        if "## Subtask outcomes" in prompt:
            child = re.search(r"^- (job_\w+) \(counter\)", prompt, re.M)
            assert child, prompt
            if not done:
                return reply(
                    tool_use("Read", {"path": f"input/subtasks/{child.group(1)}/count.txt"})
                )
            return reply(transition("write", "counted", f"the subtask says: {done.strip()}"))
        if not done:
            return reply(tool_use("Read", {"path": "input/sales.csv"}))
        if "Started subtask" in done:
            return reply(transition("WAIT_SUBTASKS", "counting in a subtask"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the regions.", "piece": "counter"})
        )
    if "## Step: write" in prompt:
        if "A one-page memo." not in prompt:
            return reply(transition("ASK", "A memo or slides?"))
        if not done:
            report = "# Sales memo\nnorth, south and east: 3 regions\n"
            return reply(tool_use("Write", {"path": "output/report.md", "content": report}))
        return reply(transition("check", "memo written"))
    assert "## Step: check" in prompt, prompt
    return reply(transition("COMPLETE", "the memo is right"))


async def test_a_three_movement_piece_with_files_a_subtask_and_a_question(
    piece_settings: Callable[..., Settings],  # noqa: F811
    pieces_dir: Path,  # noqa: F811
    fake_llm: FakeMessagesAPI,
) -> None:
    (pieces_dir / "three-steps.yaml").write_text(THREE_STEPS)
    (pieces_dir / "counter.yaml").write_text(COUNTER)
    fake_llm.always(model)
    settings = piece_settings()

    async with serve(settings) as (app, client):
        draft = await submit_job(client, piece="three-steps", start=False, instruction="Report.")
        csv = b"region,sales\nnorth,10\nsouth,20\neast,30\n"
        put = await client.put(f"/jobs/{draft['id']}/files/input/sales.csv", content=csv)
        assert put.status_code == 201
        assert (await client.post(f"/jobs/{draft['id']}/start")).status_code == 200

        asked = await wait_status(client, draft["id"], {"waiting_human", "failed", "aborted"})
        assert asked["status"] == "waiting_human", asked
        assert asked["movement"] == "write"
        answer = await client.post(
            f"/jobs/{draft['id']}/comments", json={"body": "A one-page memo."}
        )
        assert answer.status_code == 201
        job = await finish(client, draft["id"])
        history = await status_history(app, draft["id"])
        jobs = (await client.get("/jobs")).json()["data"]

    assert job["status"] == "succeeded", job
    assert job["error"] is None
    assert job["result_text"] == "the memo is right"
    assert history == [
        "draft",
        "queued",
        "running",
        "waiting_subtasks",
        "queued",
        "running",
        "waiting_human",
        "queued",
        "running",
        "succeeded",
    ]
    [child] = [j for j in jobs if j["parent_job_id"] == draft["id"]]
    assert (child["piece"], child["status"], child["result_text"]) == (
        "counter",
        "succeeded",
        "3 regions",
    )
    first = prompt_of(fake_llm.requests[0].body)
    assert "- input/sales.csv" in section(first, "Workspace")
    read = [r for r in fake_llm.requests if "region,sales" in last_result(r.body)]
    assert read, "the model read the input file"
    check = next(
        prompt_of(r.body) for r in fake_llm.requests if "## Step: check" in prompt_of(r.body)
    )
    assert "- (gather) the subtask says: 3 regions" in section(
        check, "Lessons from the previous step"
    )
    report = workspace_of(settings, draft["id"]).root / "output" / "report.md"
    assert report.read_text().startswith("# Sales memo")
