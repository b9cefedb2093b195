"""GET /sessions finds sessions by title and by status; every session says its status."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel.ext.asyncio.session import AsyncSession

from app.domain.jobs import JobStatus
from app.services.jobs import get_job, set_status
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job


@pytest.fixture
async def parked(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """No runner: a job stays in whatever status the test puts it."""
    async with serve(make_settings(run_worker_in_server=False)) as pair:
        yield pair


async def _put(app: FastAPI, job_id: str, status: JobStatus) -> None:
    async def work(db: AsyncSession) -> None:
        await set_status(db, await get_job(db, "local", job_id), status)

    await app.state.database.write(work)


async def _titles(client: httpx.AsyncClient, **params: Any) -> list[str]:
    response = await client.get("/sessions", params=params)
    assert response.status_code == 200, response.text
    return [s["title"] for s in response.json()["data"]]


async def test_q_keeps_sessions_whose_title_contains_it_in_any_case(
    client: httpx.AsyncClient,
) -> None:
    for title in ("Fix the Parser", "parser notes", "Other"):
        await new_session(client, title=title)
    await new_session(client)

    assert await _titles(client, q="PARSER") == ["parser notes", "Fix the Parser"]


async def test_q_matches_percent_and_underscore_literally(client: httpx.AsyncClient) -> None:
    for title in ("100% done", "1000 done", "a_b", "axb"):
        await new_session(client, title=title)

    assert await _titles(client, q="0%") == ["100% done"]
    assert await _titles(client, q="a_b") == ["a_b"]


async def test_q_filters_before_paging(client: httpx.AsyncClient) -> None:
    for i in range(4):
        await new_session(client, title=f"match {i}")
        await new_session(client, title=f"other {i}")

    first = (await client.get("/sessions", params={"q": "match", "limit": 3})).json()
    rest = (
        await client.get("/sessions", params={"q": "match", "after": first["next_cursor"]})
    ).json()

    assert [s["title"] for s in first["data"]] == ["match 3", "match 2", "match 1"]
    assert [s["title"] for s in rest["data"]] == ["match 0"]
    assert rest["next_cursor"] is None


async def test_a_new_session_is_idle(client: httpx.AsyncClient) -> None:
    created = (await client.post("/sessions", json={})).json()

    assert created["status"] == "idle"
    assert (await client.get(f"/sessions/{created['id']}")).json()["status"] == "idle"


async def test_status_follows_the_sessions_jobs(
    parked: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = parked
    busy = await new_session(client, title="busy")
    asking = await new_session(client, title="asking")
    drafting = await new_session(client, title="drafting")
    await new_session(client, title="quiet")
    await submit_job(client, session_id=busy)  # queued: nothing runs it here
    waiting = await submit_job(client, session_id=asking)
    await _put(app, waiting["id"], JobStatus.waiting_human)
    await submit_job(client, session_id=drafting, start=False)

    assert await _titles(client, status="running") == ["busy"]
    assert await _titles(client, status="waiting") == ["asking"]
    assert await _titles(client, status="idle") == ["quiet", "drafting"]
    statuses = {s["title"]: s["status"] for s in (await client.get("/sessions")).json()["data"]}
    assert statuses == {
        "busy": "running",
        "asking": "waiting",
        "drafting": "idle",
        "quiet": "idle",
    }


async def test_a_running_job_outweighs_a_waiting_one(
    parked: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = parked
    session_id = await new_session(client, title="both")
    waiting = await submit_job(client, session_id=session_id)
    await _put(app, waiting["id"], JobStatus.waiting_subtasks)
    await submit_job(client, session_id=session_id)

    assert (await client.get(f"/sessions/{session_id}")).json()["status"] == "running"
    assert await _titles(client, status="waiting") == []


async def test_an_ended_job_leaves_its_session_idle(
    parked: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = parked
    session_id = await new_session(client, title="done")
    job = await submit_job(client, session_id=session_id)
    await _put(app, job["id"], JobStatus.failed)

    assert (await client.get(f"/sessions/{session_id}")).json()["status"] == "idle"


async def test_an_unknown_status_is_422(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions", params={"status": "busy"})

    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
