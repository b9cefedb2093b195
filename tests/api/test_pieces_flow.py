"""Pieces end to end (seed 004): the real runner and SDK against the fake Messages API.

Each test scripts what the "model" answers and checks what the runner sent it next:
the movement prompts (enriched instruction, lessons, feedback, subtask outcomes), the
tool results the model sees (denied transitions, path escapes, truncated files), and the
context actions (the wrap-up message, the forced transition).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel import col, select

from app.db.models import Event
from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use
from tests.support.apps import serve
from tests.support.chat import held, submit_job, wait_status

ENDED = {"succeeded", "failed", "aborted", "cancelled"}

TWO_STEPS = """\
name: two-steps
description: a then b
movements:
  - name: a
    instruction: Do step A.
    allowed_tools: [Read, Write, Glob]
    transitions: [b]
    default_next: b
  - name: b
    instruction: Do step B.
    allowed_tools: [Read]
    transitions: [COMPLETE]
"""

SOLO = """\
name: solo
description: one step, no default_next
movements:
  - name: only
    instruction: Do the only step.
    allowed_tools: [TaskList, Read]
    transitions: [COMPLETE]
    max_iterations: 3
"""

BROKEN = """\
name: broken
movements:
  - name: a
    instruction: x
    transitions: [nowhere]
"""


# ------------------------------------------------------------------ harness


@pytest.fixture
def pieces_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pieces"
    folder.mkdir()
    (folder / "two-steps.yaml").write_text(TWO_STEPS)
    (folder / "solo.yaml").write_text(SOLO)
    return folder


@pytest.fixture
def piece_settings(
    make_settings: Any, fake_llm: FakeMessagesAPI, tmp_path: Path, pieces_dir: Path
) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "anthropic_base_url": fake_llm.url,
            "llm_max_retries": 0,
            "worker_poll_seconds": 0.05,
            "job_heartbeat_seconds": 0.1,
            "data_dir": tmp_path / "data",
            "pieces_dir": pieces_dir,
        }
        values.update(overrides)
        settings: Settings = make_settings(**values)
        return settings

    return make


@pytest.fixture
async def strata(
    piece_settings: Callable[..., Settings],
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with serve(piece_settings()) as parts:
        yield parts


@pytest.fixture
def gate() -> Iterable[threading.Event]:
    """Holds a scripted reply back until the test has set the stage (always released)."""
    event = threading.Event()
    yield event
    event.set()


async def finish(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    return await wait_status(client, job_id, ENDED)


async def events_of(app: FastAPI, job_id: str, kind: str | None = None) -> list[Event]:
    async with app.state.runtime.database.read() as db:
        query = select(Event).where(Event.job_id == job_id)
        if kind is not None:
            query = query.where(Event.type == kind)
        return list(await db.exec(query.order_by(col(Event.id))))


async def status_history(app: FastAPI, job_id: str) -> list[str]:
    return [e.data["status"] for e in await events_of(app, job_id, "job.status")]


def transition(next_step: str, summary: str, lessons: str | None = None) -> Any:
    args = {"next_step": next_step, "summary": summary}
    if lessons is not None:
        args["lessons"] = lessons
    return tool_use("transition", args)


def blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def prompt_of(body: dict[str, Any]) -> str:
    """The movement prompt: the text of the first user message."""
    return blocks_text(body["messages"][0]["content"])


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last message."""
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    return blocks_text(block.get("content", ""))


def section(prompt: str, title: str) -> str:
    """The body of the `## title` section of a prompt (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", prompt, re.S | re.M)
    assert match, f"no '## {title}' in:\n{prompt}"
    return match.group(1)


# ------------------------------------------------------------------ GET /pieces


async def test_the_builtin_pieces_are_listed(strata: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = strata

    listed = (await client.get("/pieces")).json()

    names = {p["name"]: p for p in listed["data"]}
    assert {"default", "research"} <= set(names)
    assert "chat" not in names  # a job kind, not a piece
    assert names["default"]["movements"] == ["plan", "work", "review"]
    assert listed["problems"] == []


async def test_a_piece_is_shown_with_its_movements(
    strata: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = strata

    shown = (await client.get("/pieces/default")).json()

    assert shown["name"] == "default"
    assert shown["initial_movement"] == "plan"
    review = {m["name"]: m for m in shown["movements"]}["review"]
    assert set(review["transitions"]) == {"COMPLETE", "work"}
    assert review["default_next"] == "COMPLETE"
    assert "Read" in review["allowed_tools"]
    assert "Write" not in review["allowed_tools"]
    assert {"instruction", "max_iterations", "fresh_segment"} <= set(review)


async def test_an_unknown_piece_is_404(strata: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = strata

    assert (await client.get("/pieces/nope")).status_code == 404


async def test_an_invalid_piece_file_is_reported_and_the_valid_ones_load(
    piece_settings: Callable[..., Settings], pieces_dir: Path
) -> None:
    (pieces_dir / "broken.yaml").write_text(BROKEN)

    async with serve(piece_settings()) as (_, client):
        listed = (await client.get("/pieces")).json()

    assert {"two-steps", "solo", "default"} <= {p["name"] for p in listed["data"]}
    assert "broken" not in {p["name"] for p in listed["data"]}
    [problem] = listed["problems"]
    assert (problem["file"], problem["folder"], problem["name"]) == (
        "broken.yaml",
        "pieces_dir",
        "broken",
    )
    assert "unknown next step 'nowhere'" in problem["reason"]
    assert str(pieces_dir) not in json.dumps(listed)  # no server paths


async def test_a_custom_piece_from_the_folder_runs(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("COMPLETE", "done alone"))

    job = await finish(client, (await submit_job(client, piece="solo"))["id"])

    assert job["status"] == "succeeded"
    assert job["piece"] == "solo"
    assert job["result_text"] == "done alone"
    assert "## Step: only\nDo the only step." in prompt_of(fake_llm.requests[0].body)


# ------------------------------------------------------------------ movement events


def sse_events(body: str) -> list[dict[str, Any]]:
    """The `data` of each event of a whole SSE body."""
    return [
        json.loads(line.removeprefix("data: "))
        for line in body.splitlines()
        if line.startswith("data: ")
    ]


async def test_movements_start_and_end_as_events_of_the_job_and_its_webhooks(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """A movement's start and end are events of the job and webhooks, not only log items."""
    fake_llm.reply(transition("b", "a done"))
    fake_llm.reply(transition("COMPLETE", "b done"))
    async with serve(piece_settings(webhook_allow_private=True)) as (_, client):
        hook = await client.post(
            "/webhooks",
            json={
                "url": "http://127.0.0.1:9/hook",
                "events": ["movement.started", "movement.ended"],
            },
        )
        job = await finish(client, (await submit_job(client, piece="two-steps"))["id"])
        streamed = sse_events((await client.get(f"/jobs/{job['id']}/events")).text)
        deliveries = (await client.get(f"/webhooks/{hook.json()['id']}/deliveries")).json()

    assert job["status"] == "succeeded"
    moves = [e for e in streamed if e["type"].startswith("movement.")]
    assert [(e["type"], e["movement"]) for e in moves] == [
        ("movement.started", "a"),
        ("movement.ended", "a"),
        ("movement.started", "b"),
        ("movement.ended", "b"),
    ]
    assert [e.get("number") for e in moves[::2]] == [1, 2]
    assert [(e["next_step"], e["forced"]) for e in moves[1::2]] == [
        ("b", False),
        ("COMPLETE", False),
    ]
    assert {(e["job_id"], e["piece"]) for e in moves} == {(job["id"], "two-steps")}
    sent = [{"type": d["event_type"], **d["payload"]["data"]} for d in deliveries["data"]]
    assert sorted(sent, key=moves.index) == moves  # the webhooks carry what the stream does


# ------------------------------------------------------------------ prompts


async def test_the_enriched_instruction_has_time_last_five_comments_file_lists_and_task(
    strata: tuple[FastAPI, httpx.AsyncClient],
    fake_llm: FakeMessagesAPI,
    piece_settings: Callable[..., Settings],
    gate: threading.Event,
) -> None:
    _, client = strata
    fake_llm.enqueue(held(gate, reply(text("PRIVATE THOUGHT OF A"), transition("b", "a done"))))
    fake_llm.reply(transition("COMPLETE", "b done"))
    job = await submit_job(client, piece="two-steps", instruction="Chart the sales.")
    job_id = job["id"]
    await fake_llm.wait_for_requests(1)  # step a is running; b's prompt is built later
    await client.put(f"/jobs/{job_id}/files/input/data.csv", content=b"SECRET_CELL,1\n")
    root = workspace_of(piece_settings(), job_id).root
    (root / "output" / "draft.md").write_text("DRAFT_BODY")
    (root / "logs" / "debug.log").write_text("LOG_LINE")
    comments = ["C1-old", "C2-old", "C3-" + "x" * 800, "C4", "C5", "C6", "C7-newest"]
    for comment in comments:
        posted = await client.post(f"/jobs/{job_id}/comments", json={"body": comment})
        assert posted.status_code == 201, posted.text
    gate.set()

    assert (await finish(client, job_id))["status"] == "succeeded"
    body = fake_llm.requests[1].body
    assert len(body["messages"]) == 1  # a fresh start: nothing of step a's conversation
    prompt = prompt_of(body)
    assert prompt.index("## Current date and time") < prompt.index("## Conversation so far")
    assert prompt.index("## Conversation so far") < prompt.index("## Workspace")
    assert prompt.index("## Workspace") < prompt.index("## Task\n\nChart the sales.")
    date = re.search(r"- Date: (\d{4}-\d{2}-\d{2}) \(\w+day\)", prompt)
    assert date, prompt
    today = datetime.now(UTC).date()
    assert date.group(1) in {str(today), str(today - timedelta(days=1))}
    assert re.search(r"- Time: \d\d:\d\d \(UTC, UTC\+00:00\)", prompt)
    conversation = section(prompt, "Conversation so far")
    assert "C1-old" not in conversation and "C2-old" not in conversation
    for shown in ("C4", "C5", "C6", "C7-newest"):
        assert f"]\n{shown}\n" in conversation + "\n"
    assert "C3-" + "x" * 497 + "… [cut: 303 more characters]" in conversation
    assert "x" * 501 not in prompt
    assert conversation.count("[user · ") == 5
    workspace = section(prompt, "Workspace")
    assert "input/\n- input/data.csv" in workspace
    assert "output/\n- output/draft.md" in workspace
    for absent in ("SECRET_CELL", "DRAFT_BODY", "LOG_LINE", "debug.log", "logs/", "PRIVATE"):
        assert absent not in prompt, absent


async def test_a_movement_is_offered_only_its_allowed_tools_and_transition(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("b", "a done"))
    fake_llm.reply(transition("COMPLETE", "b done"))

    await finish(client, (await submit_job(client, piece="two-steps"))["id"])

    offered = [{t["name"] for t in r.tools} for r in fake_llm.requests]
    assert offered == [{"Read", "Write", "Glob", "transition"}, {"Read", "transition"}]
    assert "next_step is one of: b, ASK, ABORT." in prompt_of(fake_llm.requests[0].body)


async def test_the_task_list_is_shown_at_every_movement_start(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(tool_use("TaskCreate", {"subject": "draw the chart"}))
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("ABORT", "enough"))

    await finish(client, (await submit_job(client))["id"])

    first = section(prompt_of(fake_llm.requests[0].body), "Checklist (your task list)")
    assert first.startswith("The task list is empty.")
    work = section(prompt_of(fake_llm.requests[2].body), "Checklist (your task list)")
    assert "[1] pending: draw the chart" in work


# ------------------------------------------------------------------ lessons and feedback


async def test_the_next_movement_gets_the_lessons_of_the_previous_one(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("b", "a done", "dates are ISO; totals in column 3"))
    fake_llm.reply(transition("COMPLETE", "b done"))

    job = await finish(client, (await submit_job(client, piece="two-steps"))["id"])

    assert job["status"] == "succeeded"
    assert "## Lessons from the previous step" not in prompt_of(fake_llm.requests[0].body)
    lessons = section(prompt_of(fake_llm.requests[1].body), "Lessons from the previous step")
    assert lessons.strip() == "- (a) dates are ISO; totals in column 3"


async def test_lessons_are_logged_and_complete_without_lessons_uses_the_summary(
    strata: tuple[FastAPI, httpx.AsyncClient],
    fake_llm: FakeMessagesAPI,
    piece_settings: Callable[..., Settings],
) -> None:
    _, client = strata
    fake_llm.reply(transition("b", "a done", "dates are ISO"))
    fake_llm.reply(transition("COMPLETE", "the chart is in output/chart.svg"))

    job = await finish(client, (await submit_job(client, piece="two-steps"))["id"])

    assert job["lessons"] == ["(a) dates are ISO", "(b) the chart is in output/chart.svg"]
    log = workspace_of(piece_settings(), job["id"]).root / "logs" / "lessons.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["movement"], e["next_step"], e["lessons"]) for e in entries] == [
        ("a", "b", "dates are ISO"),
        ("b", "COMPLETE", "the chart is in output/chart.svg"),
    ]
    assert all(e["job_id"] == job["id"] and e["forced"] is False for e in entries)


async def test_lessons_in_the_prompt_are_capped_dropping_the_oldest(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(transition("work", "planned", "OLDEST " + "o" * 150))
    fake_llm.reply(transition("review", "worked", "NEWEST " + "n" * 150))
    fake_llm.reply(transition("ABORT", "stop"))

    async with serve(piece_settings(lessons_max_chars=200)) as (_, client):
        await finish(client, (await submit_job(client))["id"])

    lessons = section(prompt_of(fake_llm.requests[2].body), "Lessons from the previous step")
    assert "NEWEST" in lessons
    assert "OLDEST" not in lessons
    assert len(lessons.strip()) <= 200


async def test_review_feedback_reaches_the_work_step(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("work", "planned", "write output/report.md"))
    fake_llm.reply(transition("review", "report written"))
    fake_llm.reply(transition("work", "FIX: the report has no title"))
    fake_llm.reply(transition("review", "title added"))
    fake_llm.reply(transition("COMPLETE", "report approved"))

    job = await finish(client, (await submit_job(client))["id"])

    assert job["status"] == "succeeded"
    steps = [re.findall(r"^## Step: (\w+)", prompt_of(r.body), re.M) for r in fake_llm.requests]
    assert steps == [["plan"], ["work"], ["review"], ["work"], ["review"]]
    assert "## Feedback for this step" not in prompt_of(fake_llm.requests[1].body)
    second_work = prompt_of(fake_llm.requests[3].body)
    assert section(second_work, "Feedback for this step").strip() == (
        "- (review) FIX: the report has no title"
    )


# ------------------------------------------------------------------ special steps


async def test_ask_waits_for_a_comment_then_resumes_at_the_movement_that_asked(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    app, client = strata
    fake_llm.reply(transition("work", "planned", "ask about the format"))
    fake_llm.reply(transition("ASK", "Slides or a memo?"))
    job_id = (await submit_job(client))["id"]

    waiting = await wait_status(client, job_id, {"waiting_human"} | ENDED)
    assert waiting["status"] == "waiting_human"
    assert waiting["movement"] == "work"
    comments = (await client.get(f"/jobs/{job_id}/comments")).json()["data"]
    assert [(c["author"], c["body"]) for c in comments] == [("agent", "Slides or a memo?")]
    fake_llm.reply(transition("review", "memo written"))
    fake_llm.reply(transition("COMPLETE", "memo approved"))

    await client.post(f"/jobs/{job_id}/comments", json={"body": "A memo, one page."})

    job = await finish(client, job_id)
    assert job["status"] == "succeeded"
    resumed = prompt_of(fake_llm.requests[2].body)
    assert "## Step: work" in resumed
    conversation = section(resumed, "Conversation so far")
    assert re.search(r"\[agent · [^\]]+\]\nSlides or a memo\?", conversation)
    assert re.search(r"\[user · [^\]]+\]\nA memo, one page\.", conversation)
    assert "- (plan) ask about the format" in resumed
    assert await status_history(app, job_id) == [
        "queued",
        "running",
        "waiting_human",
        "queued",
        "running",
        "succeeded",
    ]


async def test_abort_ends_the_job_aborted(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("ABORT", "the input is empty"))

    job = await finish(client, (await submit_job(client))["id"])

    assert job["status"] == "aborted"
    assert job["result_text"] == "the input is empty"
    assert job["movement"] == "plan"
    assert job["error"] is None
    assert len(fake_llm.requests) == 1


async def test_a_denied_next_step_is_an_error_the_model_can_fix(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    denied = transition("COMPLETE", "nothing to do")
    fake_llm.reply(denied)
    fake_llm.reply(transition("work", "planned after all"))
    fake_llm.reply(transition("ABORT", "stop here"))

    job = await finish(client, (await submit_job(client))["id"])

    [result] = tool_results(fake_llm.requests[1].body)
    assert result["tool_use_id"] == denied.id
    assert result["is_error"] is True
    assert "'COMPLETE' is not open from 'plan'" in result_text(result)
    assert "work" in result_text(result)
    assert "## Step: work" in prompt_of(fake_llm.requests[2].body)
    assert job["status"] == "aborted"
    assert job["movement"] == "work"


async def test_wait_subtasks_runs_the_children_then_resumes_the_parent_with_outcomes(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    app, client = strata

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nCount the apples." in prompt:
            return reply(transition("COMPLETE", "12 apples"))
        if "## Task\n\nCount the pears." in prompt:
            return reply(transition("COMPLETE", "7 pears"))
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "19 fruits in all"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "counting in parallel"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "solo"}),
            tool_use("spawn_subtask", {"instruction": "Count the pears.", "piece": "solo"}),
        )

    for _ in range(5):
        fake_llm.respond_with(script)
    parent = await submit_job(client, piece="research", instruction="How many fruits?")

    done = await finish(client, parent["id"])

    assert done["status"] == "succeeded", (done["error"], done["result_text"])
    assert done["result_text"] == "19 fruits in all"
    children = [j for j in (await client.get("/jobs")).json()["data"] if j["parent_job_id"]]
    assert len(children) == 2
    assert {c["status"] for c in children} == {"succeeded"}
    assert {c["parent_job_id"] for c in children} == {parent["id"]}
    assert all(c["session_id"] != parent["session_id"] for c in children)
    history = await status_history(app, parent["id"])
    assert history[:3] == ["queued", "running", "waiting_subtasks"]
    assert history[-3:] == ["queued", "running", "succeeded"]
    [final] = [r.body for r in fake_llm.requests if "## Subtask outcomes" in prompt_of(r.body)]
    outcomes = section(prompt_of(final), "Subtask outcomes")
    for child in children:
        assert f"- {child['id']} (solo): succeeded: {child['result_text']}" in outcomes
    assert {c["result_text"] for c in children} == {"12 apples", "7 pears"}


async def test_a_parent_resumes_even_when_its_children_ended_before_it_waited(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    spawn = tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "solo"})
    fake_llm.reply(spawn)
    fake_llm.enqueue(held(gate, reply(transition("WAIT_SUBTASKS", "waiting"))))
    fake_llm.reply(transition("COMPLETE", "no apples counted"))

    async with serve(piece_settings(worker_concurrency=1)) as (_, client):
        parent = await submit_job(client, piece="research")
        await fake_llm.wait_for_requests(2)  # the child is queued behind the parent
        [child] = [j for j in (await client.get("/jobs")).json()["data"] if j["parent_job_id"]]
        assert (await client.post(f"/jobs/{child['id']}/cancel")).json()["status"] == "cancelled"
        gate.set()

        done = await wait_status(client, parent["id"], ENDED, seconds=10)

    assert done["status"] == "succeeded"
    outcomes = section(prompt_of(fake_llm.requests[2].body), "Subtask outcomes")
    assert f"- {child['id']} (solo): cancelled" in outcomes


LOOPER = """\
name: looper
description: goes from a to b and back, never done
max_movements: 10
movements:
  - name: a
    instruction: Step A.
    transitions: [b]
  - name: b
    instruction: Step B.
    transitions: [a, COMPLETE]
"""


def spawn(instruction: str, piece: str = "solo") -> Any:
    return tool_use("spawn_subtask", {"instruction": instruction, "piece": piece})


async def jobs_of(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    return list((await client.get("/jobs")).json()["data"])


async def test_a_subtask_past_the_most_one_job_may_start_is_an_error_result(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """Subtasks are bounded in number: one past the most a job may start is an error."""

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nCount" in prompt:
            return reply(transition("COMPLETE", "counted"))
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "all counted"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting"))
        return reply(spawn("Count the apples."), spawn("Count the pears."))

    for _ in range(4):
        fake_llm.respond_with(script)
    async with serve(piece_settings(job_max_subtasks=1)) as (_, client):
        parent = await submit_job(client, piece="research", instruction="How many fruits?")
        done = await finish(client, parent["id"])
        children = [j for j in await jobs_of(client) if j["parent_job_id"]]

    assert done["status"] == "succeeded", done["error"]
    assert [c["instruction"] for c in children] == ["Count the apples."]
    [spawned] = [r.body for r in fake_llm.requests if len(tool_results(r.body)) == 2]
    first, second = tool_results(spawned)
    assert not first.get("is_error")
    assert second["is_error"] is True
    assert "STRATA_JOB_MAX_SUBTASKS=1" in result_text(second)


async def test_a_subtask_below_the_deepest_level_is_an_error_result(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    """Subtasks are bounded in depth: one below the deepest level is an error."""

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nNested" in prompt:  # every level tries to go one deeper
            if tool_results(body):
                return reply(transition("COMPLETE", "done at this level"))
            return reply(spawn("Nested work.", piece="research"))
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "all done"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting"))
        return reply(spawn("Nested work.", piece="research"))

    for _ in range(5):  # the root's spawn and wait, the child's, the root's end
        fake_llm.respond_with(script)
    async with serve(piece_settings(job_max_subtask_depth=1)) as (_, client):
        root = await submit_job(client, piece="research", instruction="Top work.")
        done = await finish(client, root["id"])
        jobs = await jobs_of(client)

    assert done["status"] == "succeeded", done["error"]
    [child] = [j for j in jobs if j["parent_job_id"]]
    assert child["parent_job_id"] == root["id"]
    assert len(jobs) == 2  # no grandchild
    refused = [
        block
        for r in fake_llm.requests
        if "## Task\n\nNested" in prompt_of(r.body)
        for block in tool_results(r.body)
    ]
    assert [b["is_error"] for b in refused] == [True]
    assert "STRATA_JOB_MAX_SUBTASK_DEPTH" in result_text(refused[0])


async def test_a_subtasks_movements_count_against_its_roots_budget(
    piece_settings: Callable[..., Settings],
    fake_llm: FakeMessagesAPI,
    pieces_dir: Path,
) -> None:
    """A subtask has no movement budget of its own: it spends its root's. The root's is 3
    here: its own first movement and two of its child's spend it; the child's own piece
    allows 10."""
    (pieces_dir / "looper.yaml").write_text(LOOPER)

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "Step A." in prompt:
            return reply(transition("b", "a done"))
        if "Step B." in prompt:
            return reply(transition("a", "b done"))
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "all done"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting"))
        return reply(spawn("Go round.", piece="looper"))

    for _ in range(4):  # the root's spawn and wait, the child's a and b
        fake_llm.respond_with(script)
    async with serve(piece_settings(job_max_movements=3)) as (app, client):
        root = await submit_job(client, piece="research", instruction="Top work.")
        done = await finish(client, root["id"])
        [child] = [j for j in await jobs_of(client) if j["parent_job_id"]]
        child_movements = await events_of(app, child["id"], "movement.started")
        root_movements = await events_of(app, root["id"], "movement.started")

    assert [e.data["movement"] for e in child_movements] == ["a", "b"]
    assert child["status"] == "aborted"
    assert child["error"]["type"] == "urn:strata:problem:max-movements"
    assert f"job tree of {root['id']} has begun 3 movements" in child["error"]["detail"]
    assert len(root_movements) == 1  # its second would be the tree's fourth
    assert done["status"] == "aborted"
    assert done["error"]["type"] == "urn:strata:problem:max-movements"


async def test_wait_subtasks_without_a_spawned_child_is_an_error_result(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    fake_llm.reply(transition("WAIT_SUBTASKS", "waiting for nothing"))
    fake_llm.reply(transition("COMPLETE", "did it myself"))

    job = await finish(client, (await submit_job(client, piece="research"))["id"])

    [result] = tool_results(fake_llm.requests[1].body)
    assert result["is_error"] is True
    assert "spawn_subtask" in result_text(result)
    assert job["status"] == "succeeded"


async def test_a_movement_over_its_iteration_limit_fails_the_job(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    for _ in range(3):
        fake_llm.reply(tool_use("TaskList", {}))

    job = await finish(client, (await submit_job(client, piece="solo"))["id"])

    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:movement-max-iterations"
    assert "'only'" in job["error"]["detail"]


# ------------------------------------------------------------------ context thresholds


async def test_at_85_percent_the_model_is_asked_to_wrap_up(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 8600, "output_tokens": 5})
    fake_llm.reply(transition("ABORT", "wrapped up"))

    async with serve(piece_settings(context_window_tokens=10_000)) as (app, client):
        job = await finish(client, (await submit_job(client))["id"])
        kinds = [e.type for e in await events_of(app, job["id"]) if e.type.startswith("context.")]

    last = fake_llm.requests[1].body["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0]["type"] == "tool_result"
    wrap_up = blocks_text(last["content"])
    assert "Your context is 86% full. Wrap up this step now" in wrap_up
    assert "call `transition`" in wrap_up
    assert kinds == ["context.warn", "context.prompt"]
    assert job["status"] == "aborted"


async def test_at_95_percent_the_movement_is_forced_to_its_default_next(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 9600, "output_tokens": 5})
    fake_llm.reply(transition("ABORT", "stopped in work"))

    async with serve(piece_settings(context_window_tokens=10_000)) as (app, client):
        job = await finish(client, (await submit_job(client))["id"])
        forced = await events_of(app, job["id"], "context.force_transition")

    assert len(fake_llm.requests) == 2
    assert "## Step: work" in prompt_of(fake_llm.requests[1].body)
    assert len(fake_llm.requests[1].body["messages"]) == 1  # work starts afresh
    [event] = forced
    assert event.data["movement"] == "plan"
    assert event.data["ratio"] == pytest.approx(0.96, abs=0.01)  # usage + what was added
    assert job["status"] == "aborted"
    assert job["movement"] == "work"


async def test_at_95_percent_without_default_next_the_job_aborts(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskList", {}), usage={"input_tokens": 9900, "output_tokens": 5})

    async with serve(piece_settings(context_window_tokens=10_000)) as (_, client):
        job = await finish(client, (await submit_job(client, piece="solo"))["id"])

    assert job["status"] == "aborted"
    assert job["movement"] == "only"
    assert "forced" in job["result_text"]
    assert len(fake_llm.requests) == 1


# ------------------------------------------------------------------ workspace tools


async def test_a_path_escape_by_the_model_is_an_error_naming_the_workspace(
    strata: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = strata
    climb = tool_use("Read", {"path": "../../etc/passwd"})
    absolute = tool_use("Read", {"path": "/etc/passwd"})
    fake_llm.reply(climb, absolute)
    fake_llm.reply(transition("ABORT", "cannot read that"))

    await finish(client, (await submit_job(client))["id"])

    results = {r["tool_use_id"]: r for r in tool_results(fake_llm.requests[1].body)}
    for use in (climb, absolute):
        assert results[use.id]["is_error"] is True
        assert "workspace" in result_text(results[use.id])
        assert "root:" not in result_text(results[use.id])
    assert "leaves the workspace" in result_text(results[climb.id])
    assert "absolute" in result_text(results[absolute.id])


async def test_a_large_file_is_cut_at_a_line_boundary_with_how_to_read_on(
    piece_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    lines = [f"row {i:05d}: " + "v" * 40 + "\n" for i in range(1, 8001)]
    content = "".join(lines)  # about 420 KB
    window = 10_000
    fake_llm.enqueue(held(gate, reply(tool_use("Read", {"path": "input/big.txt"}))))

    def read_on(body: dict[str, Any]) -> Step:
        note = re.search(r"offset=(\d+) and limit=(\d+)", result_text(tool_results(body)[0]))
        assert note, tool_results(body)
        return reply(
            tool_use("Read", {"path": "input/big.txt", "offset": int(note.group(1)), "limit": 2})
        )

    fake_llm.respond_with(read_on)
    fake_llm.reply(transition("ABORT", "read enough"))

    async with serve(piece_settings(context_window_tokens=window)) as (_, client):
        job_id = (await submit_job(client))["id"]
        await fake_llm.wait_for_requests(1)
        put = await client.put(f"/jobs/{job_id}/files/input/big.txt", content=content.encode())
        assert put.status_code == 201, put.text
        gate.set()
        await finish(client, job_id)

    first = result_text(tool_results(fake_llm.requests[1].body)[0])
    assert len(first) <= window // 2 * 4  # half the window, at 4 characters a token
    shown, note = first.split("\n[Output truncated", 1)
    assert content.startswith(shown)
    assert shown.endswith("\n")  # whole lines only
    count = shown.count("\n")
    assert 0 < count < 8000
    assert f"showing lines 1-{count} of " in note
    assert f"offset={count + 1}" in note
    second = result_text(tool_results(fake_llm.requests[2].body)[0])
    assert f"row {count + 1:05d}" in second
    assert f"row {count:05d}" not in second


TASK_STEP = """\
name: task-step
description: one step that may change the task list
movements:
  - name: only
    instruction: Keep your task list current.
    allowed_tools: [TaskUpdate, TaskList]
    transitions: [COMPLETE]
"""


async def test_a_movement_offering_the_task_tools_gets_the_task_reminder(
    piece_settings: Callable[..., Settings], pieces_dir: Path, fake_llm: FakeMessagesAPI
) -> None:
    """Seed 000 in movements: with N = 0 the first request of a session with an active
    task carries the reminder, as it would in chat."""
    (pieces_dir / "task-step.yaml").write_text(TASK_STEP)
    settings = piece_settings(reminder_requests_since_task_write=0)
    fake_llm.reply(transition("COMPLETE", "done"))
    async with serve(settings) as (_app, client):
        session_id = (await client.post("/sessions", json={})).json()["id"]
        created = await client.post(
            f"/sessions/{session_id}/tasks", json={"subject": "ship it", "description": ""}
        )
        job = await submit_job(client, piece="task-step", session_id=session_id)
        ended = await finish(client, job["id"])

    assert created.status_code == 201
    assert ended["status"] == "succeeded"
    [request] = fake_llm.requests
    assert "<system-reminder>" in json.dumps(request.body["messages"][-1])
    assert "- taskid 1 [pending] ship it" in json.dumps(request.body)
