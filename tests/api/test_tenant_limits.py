"""A tenant is admitted by the jobs it has queued and running, not by its requests in flight.

Without a worker in the server every job a test queues stays queued, so what the test
sends shows the cap at work: chat messages, job submissions, draft starts and transcript
imports are refused past it; requests in flight, waiting ones included, are not counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from tests.support.apps import serve
from tests.support.memory import hook_payload

PROBLEM = "application/problem+json"
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}
TENANTS = "acme:key-a,globex:key-b"


@pytest.fixture
def queue_only(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings whose jobs stay queued (no worker runs them)."""

    def make(**overrides: Any) -> Settings:
        return make_settings(api_keys=TENANTS, run_worker_in_server=False, **overrides)

    return make


@pytest.fixture
async def capped(
    queue_only: Callable[..., Settings],
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Two tenants (acme: key-a, globex: key-b), at most two jobs queued or running each."""
    settings = queue_only(tenant_max_active_jobs=2, admission_retry_after_seconds=7)
    async with serve(settings) as parts:
        yield parts


async def session_of(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await client.post("/sessions", json={}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def message(
    client: httpx.AsyncClient, headers: dict[str, str], session_id: str | None = None
) -> httpx.Response:
    session_id = session_id or await session_of(client, headers)
    return await client.post(
        f"/sessions/{session_id}/messages", json={"text": "Hi"}, headers=headers
    )


async def jobs_of(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    return list((await client.get("/jobs", headers=headers)).json()["data"])


async def at_cap(client: httpx.AsyncClient) -> None:
    """Acme's two jobs queued."""
    for _ in range(2):
        assert (await message(client, ACME)).status_code == 202


def transcript_stop(session_id: str) -> dict[str, Any]:
    line = (
        '{"type":"user","uuid":"u-1","timestamp":"2026-05-04T09:00:00Z",'
        '"message":{"role":"user","content":"Hello"}}'
    )
    return hook_payload("stop", session_id=session_id, transcript=line + "\n")


async def test_fifty_messages_sent_at_once_without_wait_are_all_admitted(
    make_settings: Callable[..., Settings],
) -> None:
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        sessions = [await session_of(client, {}) for _ in range(5)]

        sent = await asyncio.gather(
            *(message(client, {}, sessions[i % len(sessions)]) for i in range(50))
        )

    assert [response.status_code for response in sent] == [202] * 50


async def test_a_tenant_at_its_cap_of_queued_and_running_jobs_gets_429_with_retry_after(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)
    jobs_before = await jobs_of(client, ACME)

    refused = await client.post("/jobs", json={"instruction": "Do it."}, headers=ACME)

    assert refused.status_code == 429
    assert refused.headers["content-type"] == PROBLEM
    assert refused.headers["retry-after"] == "7"
    assert refused.json()["type"] == "urn:strata:problem:too-many-requests"
    assert "STRATA_TENANT_MAX_ACTIVE_JOBS" in refused.json()["detail"]
    assert await jobs_of(client, ACME) == jobs_before


async def test_a_message_past_the_cap_changes_nothing(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)
    session_id = await session_of(client, ACME)

    refused = await message(client, ACME, session_id)

    assert refused.status_code == 429
    items = await client.get(f"/sessions/{session_id}/items", headers=ACME)
    assert items.json()["data"] == []
    assert len(await jobs_of(client, ACME)) == 2


async def test_a_draft_is_taken_at_the_cap_but_not_started(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)

    draft = await client.post("/jobs", json={"instruction": "Do it.", "start": False}, headers=ACME)
    started = await client.post(f"/jobs/{draft.json()['id']}/start", headers=ACME)

    assert draft.status_code == 201, draft.text
    assert started.status_code == 429
    job = await client.get(f"/jobs/{draft.json()['id']}", headers=ACME)
    assert job.json()["status"] == "draft"


async def test_a_transcript_import_past_the_cap_gets_429_and_imports_nothing(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)

    refused = await client.post("/hooks/claude-code", json=transcript_stop("cc-1"), headers=ACME)
    start = await client.post(
        "/hooks/claude-code",
        json=hook_payload("session_start_startup", session_id="cc-2", cwd="/work/project"),
        headers=ACME,
    )

    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "7"
    assert start.status_code == 200, start.text  # no import: nothing to admit


async def test_another_tenant_is_not_affected(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)

    sent = await message(client, GLOBEX)
    imported = await client.post(
        "/hooks/claude-code", json=transcript_stop("cc-globex"), headers=GLOBEX
    )

    assert sent.status_code == 202, sent.text
    assert imported.status_code == 200, imported.text


async def test_a_job_that_ended_makes_room_again(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    await at_cap(client)
    job_id = (await jobs_of(client, ACME))[0]["id"]

    cancelled = await client.post(f"/jobs/{job_id}/cancel", headers=ACME)
    sent = await message(client, ACME)

    assert cancelled.status_code == 200, cancelled.text
    assert sent.status_code == 202, sent.text


async def test_requests_waiting_for_their_turns_do_not_hold_back_admission(
    queue_only: Callable[..., Settings],
) -> None:
    """Ten `wait=true` messages wait for turns no worker runs: the tenant has ten jobs
    queued, far from its cap, and another message is admitted."""
    async with serve(queue_only()) as (_, client):
        sessions = [await session_of(client, ACME) for _ in range(10)]
        waiting = [
            asyncio.create_task(
                client.post(
                    f"/sessions/{session_id}/messages",
                    params={"wait": "true", "timeout": 60},
                    json={"text": "Hi"},
                    headers=ACME,
                )
            )
            for session_id in sessions
        ]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(jobs := await jobs_of(client, ACME)) < len(sessions):  # all waiting
            assert loop.time() < deadline, "the messages were never queued"
            assert not any(task.done() for task in waiting)
            await asyncio.sleep(0.02)

        sent = await message(client, ACME)

        for job in jobs:  # their waits end
            await client.post(f"/jobs/{job['id']}/cancel", headers=ACME)
        ended = await asyncio.gather(*waiting)

    assert sent.status_code == 202, sent.text
    assert [response.status_code for response in ended] == [409] * len(sessions)


async def test_messages_sent_at_once_past_the_cap_admit_exactly_the_cap(
    capped: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = capped
    sessions = [await session_of(client, ACME) for _ in range(6)]

    sent = await asyncio.gather(*(message(client, ACME, session_id) for session_id in sessions))

    assert sorted(response.status_code for response in sent) == [202, 202, 429, 429, 429, 429]
    assert len(await jobs_of(client, ACME)) == 2
