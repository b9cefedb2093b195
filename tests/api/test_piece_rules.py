"""The rules that make a piece job's answer trustworthy, one test each, with the
real runner and SDK against the fake Messages API.

Only the model completes a job; loops are bounded; feedback goes where it is addressed;
movements start from a system prompt; a job leaves its chat session's context as it was;
subtasks are owned; checklists and the git excerpt reach the next movement.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.schemas.events import StreamEventData
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.services.piece_jobs import workspace_of
from app.settings import Settings
from app.worker.piece_state import OpenMovement, PieceState
from tests.api.test_pieces_flow import (  # noqa: F401  (fixtures)
    events_of,
    finish,
    gate,
    piece_settings,
    pieces_dir,
    prompt_of,
    result_text,
    section,
    strata,
    tool_results,
    transition,
)
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use
from tests.support.apps import serve
from tests.support.chat import held, new_session, submit_job, wait_status

Strata = tuple[FastAPI, httpx.AsyncClient]

FORCED_DONE = """\
name: forced-done
movements:
  - name: only
    instruction: Do the only step.
    transitions: [COMPLETE]
    default_next: COMPLETE
"""

LOOP = """\
name: loop
max_movements: 3
movements:
  - name: a
    instruction: Step A.
    transitions: [b]
  - name: b
    instruction: Step B.
    transitions: [a, COMPLETE]
"""

WITH_SYSTEM = """\
name: with-system
system: You are the piece's own analyst.
movements:
  - name: only
    instruction: Do it.
    transitions: [COMPLETE]
"""

WRITES = """\
name: writes
movements:
  - name: only
    instruction: Write your result.
    allowed_tools: [Write]
    transitions: [COMPLETE]
"""

# a subtask piece whose one tool waits for a person
GATED_WRITES = """\
name: gated-writes
movements:
  - name: only
    instruction: Write your result.
    allowed_tools: [Write]
    transitions: [COMPLETE]
    tool_policy:
      - {tool: Write, effect: ask}
"""


@pytest.fixture
def more_pieces(pieces_dir: Path) -> Path:  # noqa: F811
    for name, body in {
        "forced-done": FORCED_DONE,
        "gated-writes": GATED_WRITES,
        "loop": LOOP,
        "with-system": WITH_SYSTEM,
        "writes": WRITES,
    }.items():
        (pieces_dir / f"{name}.yaml").write_text(body)
    return pieces_dir


@pytest.fixture
async def app_client(
    more_pieces: Path,
    piece_settings: Callable[..., Settings],  # noqa: F811
) -> Any:
    async with serve(piece_settings()) as parts:
        yield parts


def steps_of(fake: FakeMessagesAPI) -> list[str]:
    names = []
    for request in fake.requests:
        prompt = prompt_of(request.body)
        names.append(
            prompt.split("## Step: ", 1)[1].split("\n", 1)[0] if "## Step: " in prompt else ""
        )
    return names


# ------------------------------------------------------------------ only the model completes


async def test_a_job_whose_review_never_transitions_fails_as_not_completed(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """Only the model's COMPLETE succeeds: a job whose review was forced to end fails."""
    _, client = app_client
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("review", "worked"))
    for _ in range(3):
        fake_llm.reply(text("Looks fine to me."))

    job = await finish(client, (await submit_job(client))["id"])

    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:not-completed"
    assert "step 'review' never finished" in job["error"]["detail"]
    assert len(fake_llm.requests) == 5


async def test_a_context_forced_move_into_complete_fails_as_not_completed(
    more_pieces: Path,
    piece_settings: Callable[..., Settings],  # noqa: F811
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply(
        tool_use("Read", {"path": "x"}), usage={"input_tokens": 9600, "output_tokens": 5}
    )

    async with serve(piece_settings(context_window_tokens=10_000)) as (_, client):
        job = await finish(client, (await submit_job(client, piece="forced-done"))["id"])

    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:not-completed"
    assert "'only'" in job["error"]["detail"]


async def test_a_model_called_complete_succeeds(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = app_client
    fake_llm.reply(transition("COMPLETE", "all done"))

    job = await finish(client, (await submit_job(client, piece="forced-done"))["id"])

    assert (job["status"], job["error"]) == ("succeeded", None)


# ------------------------------------------------------------------ bounded


async def test_a_job_past_its_max_movements_is_aborted_saying_so(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A work ↔ review loop is bounded: past its movements the job is aborted, saying so."""
    _, client = app_client
    for step in ("b", "a", "b"):
        fake_llm.reply(transition(step, f"go to {step}"))

    job = await finish(client, (await submit_job(client, piece="loop"))["id"])

    assert job["status"] == "aborted"
    assert job["error"]["type"] == "urn:strata:problem:max-movements"
    assert "max_movements 3" in job["error"]["detail"]
    assert steps_of(fake_llm) == ["a", "b", "a"]


async def test_the_movement_limit_defaults_to_the_setting(
    more_pieces: Path,
    piece_settings: Callable[..., Settings],  # noqa: F811
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("review", "worked"))

    async with serve(piece_settings(job_max_movements=2)) as (_, client):
        job = await finish(client, (await submit_job(client))["id"])

    assert job["status"] == "aborted"
    assert "max_movements 2" in job["error"]["detail"]


async def test_feedback_reaches_only_the_movement_sent_back_to_and_only_once(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """The prompt's "Feedback for this step" holds what was sent back to this movement,
    once: no forward summaries, and cleared when spent."""
    _, client = app_client
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("review", "FORWARD SUMMARY ONE"))
    fake_llm.reply(transition("work", "FIX ONE"))
    fake_llm.reply(transition("review", "FORWARD SUMMARY TWO"))
    fake_llm.reply(transition("work", "FIX TWO"))
    fake_llm.reply(transition("review", "done"))
    fake_llm.reply(transition("COMPLETE", "approved"))

    job = await finish(client, (await submit_job(client))["id"])

    assert job["status"] == "succeeded"
    prompts = [prompt_of(r.body) for r in fake_llm.requests]
    reviews = [p for p in prompts if "## Step: review" in p]
    assert all("## Feedback for this step" not in p for p in reviews)
    works = [p for p in prompts if "## Step: work" in p]
    assert "## Feedback for this step" not in works[0]
    assert section(works[1], "Feedback for this step").strip() == "- (review) FIX ONE"
    assert section(works[2], "Feedback for this step").strip() == "- (review) FIX TWO"


async def test_feedback_survives_a_question_its_movement_asks(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A movement that asks runs again once answered; the feedback it was sent back with
    must still be in that run's prompt."""
    _, client = app_client
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("review", "worked"))
    fake_llm.reply(transition("work", "FIX ONE"))
    fake_llm.reply(transition("ASK", "Which file holds the fix?"))
    job_id = (await submit_job(client))["id"]
    await wait_status(client, job_id, {"waiting_human"})
    fake_llm.reply(transition("review", "fixed"))
    fake_llm.reply(transition("COMPLETE", "approved"))

    answered = await client.post(f"/jobs/{job_id}/comments", json={"body": "main.py"})
    assert answered.status_code == 201, answered.text
    job = await finish(client, job_id)

    assert job["status"] == "succeeded"
    works = [p for p in (prompt_of(r.body) for r in fake_llm.requests) if "## Step: work" in p]
    assert section(works[1], "Feedback for this step").strip() == "- (review) FIX ONE"
    assert section(works[-1], "Feedback for this step").strip() == "- (review) FIX ONE"


# ------------------------------------------------------------------ system prompts


async def test_a_movement_starts_from_the_pieces_system_prompt(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """Every movement's requests carry the piece's system prompt."""
    _, client = app_client
    fake_llm.reply(transition("COMPLETE", "done"))

    await finish(client, (await submit_job(client, piece="with-system"))["id"])

    assert "You are the piece's own analyst." in json.dumps(fake_llm.requests[0].system)


async def test_without_a_piece_system_the_sessions_prompt_is_used(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = app_client
    session_id = await new_session(client, system_prompt="Answer like a pirate.")
    fake_llm.reply(transition("COMPLETE", "done"))

    await finish(
        client, (await submit_job(client, piece="forced-done", session_id=session_id))["id"]
    )

    assert "Answer like a pirate." in json.dumps(fake_llm.requests[0].system)


async def test_without_either_strata_gives_its_default_system_prompt(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = app_client
    fake_llm.reply(transition("COMPLETE", "done"))

    await finish(client, (await submit_job(client, piece="forced-done"))["id"])

    assert "You are Strata's agent" in json.dumps(fake_llm.requests[0].system)


async def test_a_movements_prompt_carries_a_long_task_list_within_its_budget(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """The session's task list entered a movement's prompt whole: 40 tasks with long
    descriptions put ~400 KB into every movement's first request."""
    _, client = app_client
    session_id = await new_session(client)
    for n in range(40):
        task = {"subject": f"task {n + 1}", "description": "why " * 2_500}
        await client.post(f"/sessions/{session_id}/tasks", json=task)
    fake_llm.reply(transition("COMPLETE", "done"))

    await finish(
        client, (await submit_job(client, piece="forced-done", session_id=session_id))["id"]
    )

    prompt = json.dumps(fake_llm.requests[0].messages)
    assert "task 1" in prompt and "of 40 tasks shown (" in prompt
    assert len(prompt) < 30_000


# ------------------------------------------------------------------ the chat's context


async def test_a_job_in_a_chat_session_leaves_the_next_turn_its_conversation(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A job run in a chat session works in a segment of its own and gives the chat's
    back, so the next chat turn keeps the earlier conversation."""
    _, client = app_client
    session_id = await new_session(client)
    fake_llm.reply(text("EARLIER ANSWER"))
    first = await client.post(f"/sessions/{session_id}/messages", json={"text": "EARLIER QUESTION"})
    await wait_status(client, first.json()["job_id"], {"succeeded"})
    fake_llm.reply(transition("COMPLETE", "JOB SUMMARY"))
    await finish(
        client, (await submit_job(client, piece="forced-done", session_id=session_id))["id"]
    )
    fake_llm.reply(text("LATER ANSWER"))

    later = await client.post(f"/sessions/{session_id}/messages", json={"text": "LATER QUESTION"})
    await wait_status(client, later.json()["job_id"], {"succeeded"})

    job_request, chat_request = fake_llm.requests[1].body, fake_llm.requests[2].body
    assert "EARLIER QUESTION" not in json.dumps(job_request["messages"])
    sent = json.dumps(chat_request["messages"])
    assert "EARLIER QUESTION" in sent and "EARLIER ANSWER" in sent
    assert "JOB SUMMARY" not in sent and "## Step:" not in sent


async def test_a_queued_job_cancelled_after_a_hand_back_gives_the_chat_its_segment_back(
    more_pieces: Path,
    piece_settings: Callable[..., Settings],  # noqa: F811
) -> None:
    """A runner that stops (shutdown, a database outage) hands a piece job back to the
    queue while its session still points at the job's segment, so it can resume there.
    Cancelled while queued, the job ended without giving the segment back, and the next
    chat turn worked in the job's segment instead of the chat's."""
    async with serve(piece_settings(run_worker_in_server=False)) as (app, client):
        session_id = await new_session(client)
        job = await submit_job(client, piece="forced-done", session_id=session_id)

        async def as_handed_back(db: AsyncSession) -> None:
            segment = await SessionRepository(db).start_segment(session_id)
            row = await JobRepository(db).get(job["id"])
            assert row is not None
            row.movement = "only"
            row.state = PieceState(
                movements_run=1,
                open=OpenMovement("only", segment),
                chat_segment=0,
                last_segment=segment,
            ).dump()
            db.add(row)

        await app.state.runtime.database.write(as_handed_back)
        assert (await client.get(f"/sessions/{session_id}")).json()["segment"] == 1

        cancelled = await client.post(f"/jobs/{job['id']}/cancel")

        assert cancelled.json()["status"] == "cancelled"
        assert (await client.get(f"/sessions/{session_id}")).json()["segment"] == 0


# ------------------------------------------------------------------ subtasks


def fan_out(child_answer: Step) -> Callable[[dict[str, Any]], Step]:
    """The research parent spawns one `solo` child and waits; the child answers as told."""

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nCount the apples." in prompt:
            return child_answer
        if "## Subtask outcomes" in prompt:
            return reply(transition("COMPLETE", "parent done"))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting for apples"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "solo"})
        )

    return script


async def child_of(client: httpx.AsyncClient, parent_id: str) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = (await client.get("/jobs")).json()["data"]
    [child] = [j for j in jobs if j["parent_job_id"] == parent_id]
    return child


def fan_out_to(piece: str, child_answer: Step) -> Callable[[dict[str, Any]], Step]:
    """`fan_out`, the child running `piece`."""

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nCount the apples." in prompt:
            return child_answer
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting for apples"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": piece})
        )

    return script


async def test_a_child_waiting_on_a_tool_call_shows_the_call_on_the_parent(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A child held on a tool call a rule asks about shows the call (its tool and input)
    as its question on its waiting parent."""
    _, client = app_client
    call = {"path": "apples.txt", "content": "3"}
    for _ in range(3):
        fake_llm.respond_with(fan_out_to("gated-writes", reply(tool_use("Write", call))))
    parent = await submit_job(client, piece="research")
    await wait_status(client, parent["id"], {"waiting_subtasks"}, seconds=60)
    child_id = (await child_of(client, parent["id"]))["id"]
    child = await wait_status(client, child_id, {"waiting_human"}, seconds=60)

    shown = (await client.get(f"/jobs/{parent['id']}")).json()

    assert [action["tool"] for action in child["required_action"]] == ["Write"]
    assert shown["waiting_on"] == [
        {
            "job_id": child["id"],
            "movement": "only",
            "question": 'Write {"path": "apples.txt", "content": "3"}',
        }
    ]


async def test_a_child_waiting_on_a_human_shows_its_question_on_the_parent(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A child waiting on ASK shows its question on its waiting parent."""
    app, client = app_client
    for _ in range(3):
        fake_llm.respond_with(fan_out(reply(transition("ASK", "Red or green apples?"))))
    parent = await submit_job(client, piece="research")
    await fake_llm.wait_for_requests(3)
    child = await wait_status(
        client, (await child_of(client, parent["id"]))["id"], {"waiting_human"}
    )

    shown = await wait_status(client, parent["id"], {"waiting_subtasks"})

    assert shown["waiting_on"] == [
        {"job_id": child["id"], "movement": "only", "question": "Red or green apples?"}
    ]
    [event] = await events_of(app, parent["id"], "job.subtask_waiting")
    assert event.data["child_job_id"] == child["id"]
    assert event.data["question"] == "Red or green apples?"
    streamed = {"type": event.type, "session_id": parent["session_id"], **event.data}
    assert TypeAdapter(StreamEventData).validate_python(streamed).model_dump() == streamed


async def test_cancelling_a_parent_cancels_its_open_subtasks(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A cancel of the parent reaches its open subtasks: no child keeps running."""
    _, client = app_client
    for _ in range(3):
        fake_llm.respond_with(fan_out(reply(transition("ASK", "Which apples?"))))
    parent = await submit_job(client, piece="research")
    await fake_llm.wait_for_requests(3)
    child = await wait_status(
        client, (await child_of(client, parent["id"]))["id"], {"waiting_human"}
    )

    cancelled = await client.post(f"/jobs/{parent['id']}/cancel")

    assert cancelled.json()["status"] == "cancelled"
    assert (await client.get(f"/jobs/{child['id']}")).json()["status"] == "cancelled"


async def test_a_cancel_asked_while_the_model_answers_stops_the_spawn(
    app_client: Strata,
    fake_llm: FakeMessagesAPI,
    gate: threading.Event,  # noqa: F811
) -> None:
    """A cancel committed after the step's probe but before `spawn_subtask` runs makes no
    child nobody would cancel: the spawn reads the parent row under a lock."""
    app, client = app_client
    spawn = tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "solo"})
    fake_llm.enqueue(held(gate, reply(spawn)))
    parent = await submit_job(client, piece="research")
    await fake_llm.wait_for_requests(1)

    async def ask_to_cancel(db: AsyncSession) -> None:
        row = await JobRepository(db).get(parent["id"])
        assert row is not None
        row.cancel_requested = True
        db.add(row)

    await app.state.runtime.database.write(ask_to_cancel)
    gate.set()

    assert (await finish(client, parent["id"]))["status"] == "cancelled"
    assert [j for j in (await client.get("/jobs")).json()["data"] if j["parent_job_id"]] == []


@pytest.mark.parametrize("ending", ["COMPLETE", "ABORT"])
async def test_a_parent_that_ends_cancels_its_open_subtasks(
    app_client: Strata, fake_llm: FakeMessagesAPI, ending: str
) -> None:
    """A parent that ended on its own (not waiting for them) left its children running."""
    _, client = app_client

    def script(body: dict[str, Any]) -> Step:
        if "## Task\n\nCount the apples." in prompt_of(body):
            return reply(transition("ASK", "Which apples?"))
        if tool_results(body):
            return reply(transition(ending, "not waiting for the apples"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "solo"})
        )

    # the child may be cancelled before it asks at all: the script answers whoever comes
    fake_llm.always(script)
    parent = await submit_job(client, piece="research")

    ended = await finish(client, parent["id"])

    assert ended["status"] in {"succeeded", "aborted"}
    child = await wait_status(client, (await child_of(client, parent["id"]))["id"], {"cancelled"})
    assert child["status"] == "cancelled"


async def test_a_parent_reads_its_childs_output_files(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """A parent reads its child's output/."""
    _, client = app_client
    write = reply(tool_use("Write", {"path": "output/count.txt", "content": "12 apples\n"}))

    def script(body: dict[str, Any]) -> Step:
        prompt = prompt_of(body)
        if "## Task\n\nCount the apples." in prompt:
            return reply(transition("COMPLETE", "counted")) if tool_results(body) else write
        if "## Subtask outcomes" in prompt:
            if tool_results(body):
                return reply(transition("COMPLETE", "parent done"))
            child_id = prompt.split("## Subtask outcomes\n- ", 1)[1].split(" ", 1)[0]
            return reply(tool_use("Read", {"path": f"input/subtasks/{child_id}/count.txt"}))
        if tool_results(body):
            return reply(transition("WAIT_SUBTASKS", "waiting"))
        return reply(
            tool_use("spawn_subtask", {"instruction": "Count the apples.", "piece": "writes"})
        )

    for _ in range(6):
        fake_llm.respond_with(script)
    parent = await submit_job(client, piece="research")

    assert (await finish(client, parent["id"]))["status"] == "succeeded"
    read = [
        tool_results(r.body)
        for r in fake_llm.requests
        if "## Subtask outcomes" in prompt_of(r.body)
    ]
    assert result_text(read[-1][0]).startswith("12 apples")


async def test_chat_is_not_a_piece_a_subtask_can_run(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """spawn_subtask(piece="chat") is an error result: chat is a job kind, not a piece."""
    _, client = app_client
    spawn = tool_use("spawn_subtask", {"instruction": "Say hi.", "piece": "chat"})
    fake_llm.reply(spawn)
    fake_llm.reply(transition("ABORT", "no chat subtasks"))

    job = await finish(client, (await submit_job(client, piece="research"))["id"])

    [result] = tool_results(fake_llm.requests[1].body)
    assert result["is_error"] is True
    assert "unknown piece 'chat'" in result_text(result)
    assert job["status"] == "aborted"
    assert [j for j in (await client.get("/jobs")).json()["data"] if j["parent_job_id"]] == []


# ------------------------------------------------------------------ checklists and git


async def test_the_task_list_is_written_to_the_tasks_checklist_after_each_movement(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    app, client = app_client
    fake_llm.reply(tool_use("TaskCreate", {"subject": "draw the chart"}))
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("ABORT", "stop"))

    job = await finish(client, (await submit_job(client))["id"])

    root = workspace_of(app.state.runtime.settings, job["id"]).root
    tasks = json.loads((root / "logs" / "checklists" / "tasks.json").read_text())
    assert [(t["taskid"], t["subject"], t["status"]) for t in tasks["tasks"]] == [
        (1, "draw the chart", "pending")
    ]


async def test_a_checklist_a_movement_writes_is_shown_to_the_next_one(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    _, client = app_client
    checklist = {"items": [{"check": "totals add up", "done": False}]}
    fake_llm.reply(transition("work", "planned"))
    write = tool_use(
        "Write", {"path": "logs/checklists/review.json", "content": json.dumps(checklist)}
    )
    fake_llm.reply(write)
    fake_llm.reply(transition("review", "worked"))
    fake_llm.reply(transition("ABORT", "stop"))

    await finish(client, (await submit_job(client))["id"])

    [written] = tool_results(fake_llm.requests[2].body)
    assert written["is_error"] is False, result_text(written)
    assert "## Checklists" not in prompt_of(fake_llm.requests[1].body)
    review = section(prompt_of(fake_llm.requests[3].body), "Checklists")
    assert "### logs/checklists/review.json" in review
    assert '{"items":[{"check":"totals add up","done":false}]}' in review


def make_repository(git: list[str]) -> None:
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "report.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)


async def test_after_a_verify_movement_the_next_one_gets_a_git_excerpt(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    app, client = app_client
    draft = await submit_job(client, start=False)
    output = workspace_of(app.state.runtime.settings, draft["id"]).root / "output"
    output.mkdir(parents=True, exist_ok=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(output)]
    (output / "report.md").write_text("first\n")
    make_repository(git)
    (output / "report.md").write_text("first\nSECOND LINE\n")
    fake_llm.reply(transition("work", "planned"))
    fake_llm.reply(transition("review", "worked"))
    fake_llm.reply(transition("work", "add a title"))
    fake_llm.reply(transition("ABORT", "stop"))

    await client.post(f"/jobs/{draft['id']}/start")
    await finish(client, draft["id"])

    assert "## Workspace changes (git)" not in prompt_of(fake_llm.requests[2].body)
    excerpt = section(prompt_of(fake_llm.requests[3].body), "Workspace changes (git)")
    assert "     M report.md" in excerpt
    assert "    +SECOND LINE" in excerpt


async def test_the_event_stream_of_an_aborted_job_ends(
    app_client: Strata, fake_llm: FakeMessagesAPI
) -> None:
    """`aborted` is a terminal status like the others: a job's stream ends with it."""
    _, client = app_client
    fake_llm.reply(transition("ABORT", "stop"))
    job = await finish(client, (await submit_job(client))["id"])

    response = await asyncio.wait_for(client.get(f"/jobs/{job['id']}/events"), timeout=20)

    assert '"status":"aborted"' in response.text.replace(" ", "")
