"""The jobs API (seed 004): submit, list, read, cancel, and comment on piece jobs.

Most tests run without a runner, so jobs stay queued and nothing races the assertions;
the ones that need a job to reach waiting_human, failed or to carry lessons and usage
run the real runner against the fake Messages API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Event, Job
from app.domain.jobs import JobStatus
from app.services.auth import LOCAL_TENANT
from app.services.comments import Author, post_comment
from app.services.jobs import get_job, set_status
from app.services.piece_jobs import submit_job as submit_job_row
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job, wait_status


@pytest.fixture
async def quiet(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app without a runner: submitted jobs stay queued."""
    async with serve(make_settings(run_worker_in_server=False)) as parts:
        yield parts


@pytest.fixture
async def api(quiet: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return quiet[1]


@pytest.fixture
async def running(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app with a runner whose LLM is the fake Messages API."""
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        llm_max_retries=0,
        worker_poll_seconds=0.05,
        job_heartbeat_seconds=0.1,
    )
    async with serve(settings) as parts:
        yield parts


async def status_history(app: FastAPI, job_id: str) -> list[str]:
    async with app.state.runtime.database.read() as db:
        rows = await db.exec(
            select(Event)
            .where(Event.job_id == job_id, Event.type == "job.status")
            .order_by(col(Event.id))
        )
        return [row.data["status"] for row in rows]


def transition(next_step: str, summary: str, lessons: str | None = None) -> Any:
    args = {"next_step": next_step, "summary": summary}
    if lessons is not None:
        args["lessons"] = lessons
    return tool_use("transition", args)


# ------------------------------------------------------------------ POST /jobs


async def test_submitting_a_job_without_a_session_creates_one(api: httpx.AsyncClient) -> None:
    job = await submit_job(api, instruction="Summarise the Q1 numbers.\nThen chart them.")

    assert job["status"] == "queued"
    assert job["piece"] == "default"
    assert job["instruction"] == "Summarise the Q1 numbers.\nThen chart them."
    assert job["id"].startswith("job_")
    session = await api.get(f"/sessions/{job['session_id']}")
    assert session.status_code == 200
    assert session.json()["title"] == "Summarise the Q1 numbers."


async def test_submitting_a_job_with_a_session_id_runs_it_there(api: httpx.AsyncClient) -> None:
    session_id = await new_session(api)

    job = await submit_job(api, session_id=session_id, piece="research")

    assert job["session_id"] == session_id
    assert job["piece"] == "research"
    listed = (await api.get("/jobs", params={"session_id": session_id})).json()["data"]
    assert [j["id"] for j in listed] == [job["id"]]


@pytest.mark.parametrize("name", ["chat", "compact", "summarize", "compaction", "summary"])
async def test_an_internal_kind_is_not_a_piece_a_job_can_run(
    api: httpx.AsyncClient, name: str
) -> None:
    """`piece: chat` (and the internal kinds' names) name no piece: their handlers never
    run as a piece job."""
    response = await api.post("/jobs", json={"instruction": "hello", "piece": name})

    assert response.status_code == 422
    assert "job kind, not a piece" in response.json()["detail"]
    assert (await api.get("/jobs")).json()["data"] == []


async def test_a_submitted_job_is_of_kind_piece(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    assert (job["kind"], job["piece"]) == ("piece", "default")


async def test_a_chat_turn_is_a_job_of_kind_chat_without_a_piece(api: httpx.AsyncClient) -> None:
    session_id = await new_session(api)

    sent = await api.post(f"/sessions/{session_id}/messages", json={"text": "hi"})

    job = sent.json()["job"]
    assert (job["kind"], job["piece"]) == ("chat", None)


# ------------------------------------------------------------------ drafts


async def test_a_job_created_with_start_false_is_a_draft_that_never_runs(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    """A draft job runs only once started, so its input files arrive before it runs."""
    app, client = running
    draft = await submit_job(client, start=False)
    fake_llm.reply(transition("ABORT", "enough"))
    later = await submit_job(client)  # the runner has claimed and run a job after the draft
    await wait_status(client, later["id"], {"aborted"})

    shown = (await client.get(f"/jobs/{draft['id']}")).json()

    assert shown["status"] == "draft"
    assert shown["started_at"] is None
    assert len(fake_llm.requests) == 1
    assert await status_history(app, draft["id"]) == ["draft"]


async def test_a_draft_takes_files_and_comments_then_runs_with_them_once_started(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    app, client = running
    draft = await submit_job(client, start=False)
    put = await client.put(f"/jobs/{draft['id']}/files/input/data.csv", content=b"a,b\n")
    comment = await client.post(f"/jobs/{draft['id']}/comments", json={"body": "Use column b."})
    fake_llm.reply(transition("ABORT", "seen"))

    started = await client.post(f"/jobs/{draft['id']}/start")
    await wait_status(client, draft["id"], {"aborted"})

    assert (put.status_code, comment.status_code, started.status_code) == (201, 201, 200)
    assert started.json()["status"] == "queued"
    prompt = fake_llm.requests[0].body["messages"][0]["content"][0]["text"]
    assert "- input/data.csv" in prompt
    assert "Use column b." in prompt
    assert (await status_history(app, draft["id"]))[:3] == ["draft", "queued", "running"]


async def test_starting_a_job_that_is_not_a_draft_is_409(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    response = await api.post(f"/jobs/{job['id']}/start")

    assert response.status_code == 409
    assert response.json()["job_status"] == "queued"


async def test_starting_a_started_draft_again_is_409(api: httpx.AsyncClient) -> None:
    draft = await submit_job(api, start=False)
    assert (await api.post(f"/jobs/{draft['id']}/start")).status_code == 200

    assert (await api.post(f"/jobs/{draft['id']}/start")).status_code == 409


async def test_starting_an_unknown_job_is_404(api: httpx.AsyncClient) -> None:
    assert (await api.post("/jobs/job_nope/start")).status_code == 404


async def test_a_draft_can_be_cancelled(api: httpx.AsyncClient) -> None:
    draft = await submit_job(api, start=False)

    cancelled = await api.post(f"/jobs/{draft['id']}/cancel")

    assert cancelled.json()["status"] == "cancelled"
    assert (await api.post(f"/jobs/{draft['id']}/start")).status_code == 409


async def test_an_unknown_piece_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post("/jobs", json={"instruction": "x", "piece": "nope"})

    assert response.status_code == 422
    assert "nope" in response.json()["detail"]
    assert (await api.get("/jobs")).json()["data"] == []


async def test_an_unknown_session_is_404(api: httpx.AsyncClient) -> None:
    response = await api.post("/jobs", json={"instruction": "x", "session_id": "ses_nope"})

    assert response.status_code == 404
    assert (await api.get("/jobs")).json()["data"] == []


async def test_an_empty_instruction_is_422(api: httpx.AsyncClient) -> None:
    assert (await api.post("/jobs", json={"instruction": ""})).status_code == 422
    assert (await api.post("/jobs", json={})).status_code == 422


# ------------------------------------------------------------------ GET /jobs


async def test_jobs_are_listed_newest_first_and_filtered_by_session(
    api: httpx.AsyncClient,
) -> None:
    first = await new_session(api)
    second = await new_session(api)
    a = await submit_job(api, session_id=first)
    b = await submit_job(api, session_id=second)
    c = await submit_job(api, session_id=first)

    everything = (await api.get("/jobs")).json()["data"]
    only_first = (await api.get("/jobs", params={"session_id": first})).json()["data"]

    assert [j["id"] for j in everything] == [c["id"], b["id"], a["id"]]
    assert [j["id"] for j in only_first] == [c["id"], a["id"]]


async def test_jobs_are_filtered_by_status(api: httpx.AsyncClient) -> None:
    kept = await submit_job(api)
    dropped = await submit_job(api)
    await api.post(f"/jobs/{dropped['id']}/cancel")

    queued = (await api.get("/jobs", params={"status": "queued"})).json()["data"]
    cancelled = (await api.get("/jobs", params={"status": "cancelled"})).json()["data"]

    assert [j["id"] for j in queued] == [kept["id"]]
    assert [j["id"] for j in cancelled] == [dropped["id"]]


async def test_an_unknown_status_filter_is_422(api: httpx.AsyncClient) -> None:
    assert (await api.get("/jobs", params={"status": "sleeping"})).status_code == 422


async def test_jobs_are_paginated_with_a_cursor(api: httpx.AsyncClient) -> None:
    submitted = [(await submit_job(api, instruction=f"job {i}"))["id"] for i in range(5)]

    first = (await api.get("/jobs", params={"limit": 2})).json()
    second = (await api.get("/jobs", params={"limit": 2, "after": first["next_cursor"]})).json()
    third = (await api.get("/jobs", params={"limit": 2, "after": second["next_cursor"]})).json()

    pages = [first, second, third]
    assert [len(p["data"]) for p in pages] == [2, 2, 1]
    assert first["next_cursor"] and second["next_cursor"]
    assert third["next_cursor"] is None
    assert [j["id"] for p in pages for j in p["data"]] == list(reversed(submitted))


# ------------------------------------------------------------------ GET /jobs/{id}


async def test_a_queued_job_shows_no_movement_lessons_usage_or_error(
    api: httpx.AsyncClient,
) -> None:
    job = await submit_job(api)

    shown = (await api.get(f"/jobs/{job['id']}")).json()

    assert shown["status"] == "queued"
    assert shown["movement"] is None
    assert shown["lessons"] == []
    assert shown["error"] is None
    assert shown["usage"]["input_tokens"] == 0
    assert shown["usage"]["output_tokens"] == 0


async def test_an_unknown_job_is_404(api: httpx.AsyncClient) -> None:
    response = await api.get("/jobs/job_nope")

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_a_job_shows_its_movement_lessons_and_usage(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    app, client = running
    fake_llm.reply(
        transition("work", "planned", "the data is in input/"),
        usage={"input_tokens": 100, "output_tokens": 7},
    )
    fake_llm.reply(
        transition("ASK", "CSV or JSON?"), usage={"input_tokens": 200, "output_tokens": 9}
    )
    job = await submit_job(client)

    shown = await wait_status(client, job["id"], {"waiting_human", "failed", "succeeded"})

    assert shown["status"] == "waiting_human"
    assert shown["movement"] == "work"
    assert shown["lessons"] == ["(plan) the data is in input/"]
    assert shown["usage"]["input_tokens"] == 300
    assert shown["usage"]["output_tokens"] == 16
    assert shown["error"] is None
    assert shown["result_text"] == "CSV or JSON?"
    assert await status_history(app, job["id"]) == ["queued", "running", "waiting_human"]


async def test_a_job_whose_llm_call_fails_shows_the_error(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = running
    fake_llm.error(
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long"},
        },
    )
    job = await submit_job(client)

    shown = await wait_status(client, job["id"], {"failed", "succeeded", "aborted"})

    assert shown["status"] == "failed"
    assert shown["error"]["type"].startswith("urn:strata:problem:")
    assert shown["error"]["title"]
    assert "prompt is too long" in shown["error"]["detail"]
    assert shown["movement"] == "plan"


# ------------------------------------------------------------------ cancel


async def test_cancelling_a_queued_job_ends_it_at_once(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    response = await api.post(f"/jobs/{job['id']}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    shown = (await api.get(f"/jobs/{job['id']}")).json()
    assert shown["status"] == "cancelled"
    assert shown["finished_at"] is not None


async def test_cancelling_an_ended_job_is_409(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)
    await api.post(f"/jobs/{job['id']}/cancel")

    response = await api.post(f"/jobs/{job['id']}/cancel")

    assert response.status_code == 409


async def test_cancelling_an_unknown_job_is_404(api: httpx.AsyncClient) -> None:
    assert (await api.post("/jobs/job_nope/cancel")).status_code == 404


async def test_cancelling_a_job_waiting_for_a_human_ends_it(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = running
    fake_llm.reply(transition("ASK", "Which quarter?"))
    job = await submit_job(client)
    await wait_status(client, job["id"], {"waiting_human"})

    response = await client.post(f"/jobs/{job['id']}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    await client.post(f"/jobs/{job['id']}/comments", json={"body": "Q1"})
    shown = (await client.get(f"/jobs/{job['id']}")).json()
    assert shown["status"] == "cancelled"  # a late answer does not revive it
    assert len(fake_llm.requests) == 1


# ------------------------------------------------------------------ comments


async def test_a_comment_is_stored_and_listed_as_the_users(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    posted = await api.post(f"/jobs/{job['id']}/comments", json={"body": "Use the Q1 file."})

    assert posted.status_code == 201, posted.text
    body = posted.json()
    assert body["author"] == "user"
    assert body["body"] == "Use the Q1 file."
    assert body["job_id"] == job["id"]
    listed = (await api.get(f"/jobs/{job['id']}/comments")).json()["data"]
    assert listed == [body]


async def test_comments_are_listed_oldest_first_with_their_author_kinds(
    quiet: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = quiet
    job = await submit_job(client)
    await client.post(f"/jobs/{job['id']}/comments", json={"body": "first"})

    async def comment(db: AsyncSession) -> None:
        row = (await db.exec(select(Job).where(Job.id == job["id"]))).one()
        await post_comment(db, row, "a question", Author.agent)
        await post_comment(db, row, "re-queued", Author.system)

    await app.state.runtime.database.write(comment)
    await client.post(f"/jobs/{job['id']}/comments", json={"body": "last"})

    listed = (await client.get(f"/jobs/{job['id']}/comments")).json()["data"]

    assert [(c["author"], c["body"]) for c in listed] == [
        ("user", "first"),
        ("agent", "a question"),
        ("system", "re-queued"),
        ("user", "last"),
    ]


async def test_a_comment_on_a_queued_job_leaves_it_queued(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    await api.post(f"/jobs/{job['id']}/comments", json={"body": "also chart it"})

    assert (await api.get(f"/jobs/{job['id']}")).json()["status"] == "queued"


@pytest.mark.parametrize("ending", ["cancelled", "succeeded", "failed", "aborted"])
async def test_a_comment_on_an_ended_job_is_409_and_not_stored(
    quiet: tuple[FastAPI, httpx.AsyncClient], ending: str
) -> None:
    """A comment on an ended job would never be read: it is refused, not stored."""
    app, client = quiet
    job = await submit_job(client)

    async def end(db: AsyncSession) -> None:
        row = (await db.exec(select(Job).where(Job.id == job["id"]))).one()
        await set_status(db, row, JobStatus(ending))

    await app.state.runtime.database.write(end)

    response = await client.post(f"/jobs/{job['id']}/comments", json={"body": "too late"})

    assert response.status_code == 409, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert ending in response.json()["detail"]
    assert (await client.get(f"/jobs/{job['id']}/comments")).json()["data"] == []


async def test_an_empty_comment_is_422(api: httpx.AsyncClient) -> None:
    job = await submit_job(api)

    assert (await api.post(f"/jobs/{job['id']}/comments", json={"body": ""})).status_code == 422


async def test_comments_on_an_unknown_job_are_404(api: httpx.AsyncClient) -> None:
    assert (await api.post("/jobs/job_nope/comments", json={"body": "x"})).status_code == 404
    assert (await api.get("/jobs/job_nope/comments")).status_code == 404


async def test_ask_posts_the_question_as_an_agent_comment(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    _, client = running
    fake_llm.reply(transition("ASK", "Which quarter do you mean?"))
    job = await submit_job(client)
    await wait_status(client, job["id"], {"waiting_human"})

    listed = (await client.get(f"/jobs/{job['id']}/comments")).json()["data"]

    assert [(c["author"], c["body"]) for c in listed] == [("agent", "Which quarter do you mean?")]


async def test_a_user_comment_on_a_waiting_job_requeues_it(
    running: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI
) -> None:
    app, client = running
    fake_llm.reply(transition("ASK", "Which quarter?"))
    fake_llm.reply(transition("ABORT", "Q3 has no data"))
    job = await submit_job(client)
    await wait_status(client, job["id"], {"waiting_human"})

    await client.post(f"/jobs/{job['id']}/comments", json={"body": "Q3"})

    shown = await wait_status(client, job["id"], {"aborted", "failed", "succeeded"})
    assert shown["status"] == "aborted"
    assert shown["result_text"] == "Q3 has no data"
    assert await status_history(app, job["id"]) == [
        "queued",
        "running",
        "waiting_human",
        "queued",
        "running",
        "aborted",
    ]


# ------------------------------------------------------------------ subtasks


async def test_cancelling_a_job_cancels_its_subtasks_at_every_depth(
    quiet: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """A cancel reaches every subtask (here a child and its own child)."""
    app, client = quiet
    runtime = app.state.runtime
    piece = runtime.pieces.get("default")
    parent = await submit_job(client)

    async def spawn(parent_id: str) -> str:
        async def work(db: AsyncSession) -> str:
            above = await get_job(db, LOCAL_TENANT, parent_id)
            child = await submit_job_row(
                db, LOCAL_TENANT, instruction="x", piece=piece, parent=above
            )
            return child.id

        return str(await runtime.database.write(work))

    child = await spawn(parent["id"])
    grandchild = await spawn(child)
    other = await submit_job(client)  # not a subtask: left alone

    cancelled = await client.post(f"/jobs/{parent['id']}/cancel")

    assert cancelled.json()["status"] == "cancelled"
    for job_id in (child, grandchild):
        assert (await client.get(f"/jobs/{job_id}")).json()["status"] == "cancelled"
    assert (await client.get(f"/jobs/{other['id']}")).json()["status"] == "queued"
