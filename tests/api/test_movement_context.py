"""Movements against the validating fake: one result budget per response, the reminder
(seed 000) with its default counts, and each context event once per movement."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.db.models import Session
from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.api.test_pieces_flow import (  # the piece harness: fixtures and helpers
    events_of,
    finish,
    gate,
    piece_settings,
    pieces_dir,
    prompt_of,
    result_text,
    section,
    tool_results,
    transition,
)
from tests.fakes.messages_api import FakeMessagesAPI, Step, count_tokens, reply, tool_use
from tests.support.apps import serve
from tests.support.chat import held, submit_job

__all__ = ["gate", "piece_settings", "pieces_dir"]  # fixtures used by name

TAG = "<system-reminder>"

READER = """\
name: reader
description: one step that reads and keeps its task list
movements:
  - name: only
    instruction: Read the input and keep your task list current.
    allowed_tools: [Read, TaskUpdate, TaskList]
    transitions: [COMPLETE]
    max_iterations: 30
"""


async def test_parallel_reads_share_one_result_budget_and_each_says_how_to_read_on(
    piece_settings: Callable[..., Settings],
    pieces_dir: Path,
    fake_llm: FakeMessagesAPI,
    gate: threading.Event,
) -> None:
    """Four parallel Reads get one result budget together: each getting the whole would
    put 252,332 tokens into a 200,000-token window."""
    (pieces_dir / "reader.yaml").write_text(READER)
    window = 20_000
    content = "".join(f"line {i:06d} " + "z" * 60 + "\n" for i in range(1, 1501))  # ~105 KB
    reads = [tool_use("Read", {"path": "input/big.txt"}) for _ in range(4)]
    fake_llm.enqueue(held(gate, reply(*reads)))
    fake_llm.reply(transition("COMPLETE", "read"))

    async with serve(piece_settings(context_window_tokens=window)) as (_, client):
        job_id = (await submit_job(client, piece="reader"))["id"]
        await fake_llm.wait_for_requests(1)
        put = await client.put(f"/jobs/{job_id}/files/input/big.txt", content=content.encode())
        assert put.status_code == 201, put.text
        gate.set()
        job = await finish(client, job_id)

    assert job["status"] == "succeeded"
    first, second = (r.body for r in fake_llm.requests)
    results = [result_text(r) for r in tool_results(second)]
    assert len(results) == 4
    left = window - count_tokens(first)
    assert sum(len(r) for r in results) <= left // 2 * 4  # half of what was left, together
    for result in results:
        assert "[Output truncated" in result and "To read on, use Read with offset=" in result
    assert count_tokens(second) < 0.99 * window


async def test_a_movement_offering_the_task_tools_gets_the_reminder_at_9_and_again_at_17(
    piece_settings: Callable[..., Settings], pieces_dir: Path, fake_llm: FakeMessagesAPI
) -> None:
    """A movement offered the task tools gets the task reminder: with the seed's N = M = 8
    it comes at request 9, then every 8 (17), and the counters are the session's."""
    (pieces_dir / "reader.yaml").write_text(READER)
    for _ in range(19):
        fake_llm.reply(tool_use("Read", {"path": "input/none.txt"}))
    fake_llm.reply(transition("COMPLETE", "done"))

    async with serve(piece_settings()) as (app, client):
        session_id = (await client.post("/sessions", json={})).json()["id"]
        await client.post(f"/sessions/{session_id}/tasks", json={"subject": "read the input"})
        job = await finish(
            client, (await submit_job(client, piece="reader", session_id=session_id))["id"]
        )
        async with app.state.runtime.database.read() as db:
            row = await db.get(Session, session_id)
            assert row is not None
            counters = (row.llm_requests, row.last_task_write_request, row.last_reminder_request)

    assert job["status"] == "succeeded"
    reminded = [n for n, r in enumerate(fake_llm.requests, 1) if TAG in json.dumps(r.body)]
    assert reminded == [9, 17]
    assert "- taskid 1 [pending] read the input" in json.dumps(fake_llm.requests[8].body)
    assert counters == (20, 0, 17)


NUDGED = """\
name: nudged
description: one step whose model forgets to transition
movements:
  - name: only
    instruction: Do it, then transition.
    allowed_tools: [TaskList]
    transitions: [COMPLETE]
    default_next: COMPLETE
"""


async def test_each_context_event_fires_once_per_movement_across_its_nudges(
    piece_settings: Callable[..., Settings], pieces_dir: Path, fake_llm: FakeMessagesAPI
) -> None:
    """After a "call transition" nudge the movement goes on with the same thresholds
    fired: the warning at 70% is recorded once, not once per nudge."""
    (pieces_dir / "nudged.yaml").write_text(NUDGED)
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 7_200})
    fake_llm.reply("Thinking it over.", usage={"input_tokens": 7_300})  # ends its turn: nudge
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 7_400})
    fake_llm.reply(transition("COMPLETE", "done"))

    async with serve(piece_settings(context_window_tokens=10_000)) as (app, client):
        job = await finish(client, (await submit_job(client, piece="nudged"))["id"])
        kinds = [e.type for e in await events_of(app, job["id"]) if e.type.startswith("context.")]

    assert job["status"] == "succeeded"
    assert "call the `transition` tool" in json.dumps(fake_llm.requests[2].body)
    assert kinds == ["context.warn"]


OVERSIZED = """\
name: oversized
description: two steps whose shared system prompt alone overfills the window
max_movements: 6
system: |
  {system}
movements:
  - name: a
    instruction: Do step A.
    allowed_tools: [TaskList]
    transitions: [b]
    default_next: b
  - name: b
    instruction: Do step B.
    allowed_tools: [TaskList]
    transitions: [a, COMPLETE]
    default_next: a
"""


async def test_a_movement_whose_first_request_overfills_the_window_fails_context_exhausted(
    piece_settings: Callable[..., Settings], pieces_dir: Path, fake_llm: FakeMessagesAPI
) -> None:
    """A step whose own prompt cannot fit fails the job with `context-exhausted` at once,
    rather than being forced on to its default_next, whose prompt cannot fit either,
    movement after movement up to max_movements; no request over the window is sent."""
    window = 10_000
    system = "You follow the rules below exactly. " + "rule " * 12_000  # ~15,000 tokens
    (pieces_dir / "oversized.yaml").write_text(OVERSIZED.format(system=system))
    fake_llm.context_window_tokens = window

    async with serve(piece_settings(context_window_tokens=window)) as (app, client):
        job = await finish(client, (await submit_job(client, piece="oversized"))["id"])
        kinds = [e.type for e in await events_of(app, job["id"]) if e.type.startswith("context.")]

    assert job["status"] == "failed", job
    assert job["error"]["type"] == "urn:strata:problem:context-exhausted"
    assert "first request of step 'a'" in job["error"]["detail"]
    assert job["movement"] == "a"  # one movement, not forced on from step to step
    # each threshold once: step a alone was measured (every forced step records its own)
    assert kinds == [
        "context.warn",
        "context.prompt",
        "context.force_transition",
        "context.exhausted",
    ]
    assert fake_llm.requests == []  # nothing oversize (nothing at all) reached the API
    assert fake_llm.unexpected == []


async def test_the_subtask_outcomes_are_capped_and_the_rest_counted(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """A fan-out's outcomes, one line each however many children there are, are held to
    STRATA_SUBTASK_OUTCOMES_MAX_CHARS in the waiting movement's prompt, with a line
    counting the rest."""
    fruits = ["apples", "pears", "plums"]

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        for fruit in fruits:
            if f"## Task\n\nCount the {fruit}." in prompt:
                return reply(transition("COMPLETE", f"12 {fruit}"))
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "36 fruits in all"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "counting in parallel"))
        spawn = [{"instruction": f"Count the {f}.", "piece": "solo"} for f in fruits]
        return reply(*(tool_use("spawn_subtask", args) for args in spawn))

    for _ in range(6):
        fake_llm.respond_with(script)
    async with serve(piece_settings(subtask_outcomes_max_chars=100)) as (_, client):
        done = await finish(client, (await submit_job(client, piece="research"))["id"])

    assert done["status"] == "succeeded", done["error"]
    [final] = [r.body for r in fake_llm.requests if "## Subtask outcomes" in prompt_of(r.body)]
    lines = section(prompt_of(final), "Subtask outcomes").strip().splitlines()
    assert len(lines) == 2  # one outcome (~90 characters) fits in 100
    assert " (solo): succeeded: 12 " in lines[0]
    assert lines[1] == "…2 more: their outputs are in input/subtasks/"


async def test_a_movements_file_list_holds_the_setting_and_counts_the_rest(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """Not every file of input/ is listed (~9 tokens each: 22,000 files would leave the
    next movement no room to start): STRATA_JOB_FILES_IN_PROMPT of them, then a line for Glob."""
    fake_llm.reply(transition("COMPLETE", "listed"))
    async with serve(piece_settings(job_files_in_prompt=2)) as (_, client):
        job_id = (await submit_job(client, piece="solo", start=False))["id"]
        for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
            put = await client.put(f"/jobs/{job_id}/files/input/{name}", content=b"x")
            assert put.status_code == 201, put.text
        assert (await client.post(f"/jobs/{job_id}/start")).status_code == 200
        assert (await finish(client, job_id))["status"] == "succeeded"

    workspace = section(prompt_of(fake_llm.requests[0].body), "Workspace")
    assert "input/\n- input/a.txt\n- input/b.txt\n…2 more: use Glob\n" in workspace


async def test_the_movement_a_forced_transition_leads_to_is_told_so(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """When plan is forced on at 95% of the window without a summary, the prompt of the
    step it leads to says so, and why, so work does not start as if handed a plan."""
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 9600, "output_tokens": 5})
    fake_llm.reply(transition("ABORT", "stopped in work"))

    async with serve(piece_settings(context_window_tokens=10_000)) as (_, client):
        job = await finish(client, (await submit_job(client))["id"])

    assert job["movement"] == "work"
    note = section(prompt_of(fake_llm.requests[1].body), "The previous step was forced on")
    assert "Step 'plan' did not call transition itself and was forced on to 'work'" in note
    assert re.search(r"\(forced: the context reached 9\d% of the window\)", note)


async def test_a_forced_transition_leaves_a_lessons_line(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """A forced move is written to the lessons (the prompt's and logs/lessons.jsonl), so
    the job's record shows that a step never finished."""
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 9600, "output_tokens": 5})
    fake_llm.reply(transition("ABORT", "stopped in work"))

    settings = piece_settings(context_window_tokens=10_000)
    async with serve(settings) as (_, client):
        job = await finish(client, (await submit_job(client))["id"])

    log = workspace_of(settings, job["id"]).root / "logs" / "lessons.jsonl"
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert (entry["movement"], entry["next_step"], entry["forced"]) == ("plan", "work", True)
    assert re.fullmatch(r"forced: the context reached 9\d% of the window", entry["lessons"])
    lessons = section(prompt_of(fake_llm.requests[1].body), "Lessons from the previous step")
    assert f"- (plan) {entry['lessons']}" in lessons


async def test_a_window_set_above_the_apis_is_learnt_from_its_refusal_and_the_step_moves_on(
    piece_settings: Callable[..., Settings], pieces_dir: Path, fake_llm: FakeMessagesAPI
) -> None:
    """STRATA_CONTEXT_WINDOW_TOKENS above the API's window: the request a big Read makes is
    refused ("> 10000 maximum") and, under 30% of the configured window, would be sent
    unchanged again, failing the job. The refusal's maximum becomes the window: the step
    is forced on to its default_next, whose requests are held to it."""
    settings = piece_settings(context_window_tokens=100_000)
    fake_llm.context_window_tokens = 10_000  # after piece_settings, which matches it
    content = "".join(f"line {i:06d} " + "z" * 60 + "\n" for i in range(1, 1501))  # ~105 KB
    fake_llm.reply(tool_use("Read", {"path": "input/big.txt"}))
    fake_llm.reply(transition("COMPLETE", "done in b"))
    async with serve(settings) as (_, client):
        job_id = (await submit_job(client, piece="two-steps", start=False))["id"]
        put = await client.put(f"/jobs/{job_id}/files/input/big.txt", content=content.encode())
        assert put.status_code == 201, put.text
        assert (await client.post(f"/jobs/{job_id}/start")).status_code == 200
        job = await finish(client, job_id)

    assert job["status"] == "succeeded", job["error"]
    [refusal] = [u.reason for u in fake_llm.unexpected]
    assert re.fullmatch(r"prompt is too long: \d+ tokens > 10000 maximum", refusal)
    answered = [
        r.body for r in fake_llm.requests if r not in [u.request for u in fake_llm.unexpected]
    ]
    assert "## Step: b" in prompt_of(answered[-1])
    assert "forced: the context reached" in prompt_of(answered[-1])
    assert all(count_tokens(body) + body["max_tokens"] <= 10_000 for body in answered)
    fake_llm.reset()  # the refusal was the point
