"""Per-tenant cap on heavy requests in flight: hook posts, chat messages, job submissions.

With the cap at 1, a `wait=true` message whose turn the fake model holds back keeps
the tenant's one slot busy; what the test sends meanwhile shows what the cap does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, reply, text
from tests.support.apps import serve
from tests.support.chat import held
from tests.support.memory import hook_payload

PROBLEM = "application/problem+json"
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds the model's reply back until the test sets it (always released)."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
async def capped(agent_settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Two tenants (acme: key-a, globex: key-b), one heavy request in flight each."""
    settings = agent_settings.model_copy(
        update={
            "api_keys": "acme:key-a,globex:key-b",
            "tenant_max_concurrent_heavy": 1,
            "tenant_heavy_retry_after_seconds": 7,
        }
    )
    async with serve(settings) as parts:
        yield parts


async def session_of(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await client.post("/sessions", json={}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def session_start(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    payload = hook_payload("session_start_startup", session_id="cc-1", cwd="/work/project")
    return await client.post("/hooks/claude-code", json=payload, headers=headers)


async def jobs_of(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    return list((await client.get("/jobs", headers=headers)).json()["data"])


async def held_message(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, gate: threading.Event
) -> asyncio.Task[httpx.Response]:
    """An acme `wait=true` message, in flight until `gate` is set."""
    fake_llm.enqueue(held(gate, reply(text("Hello."))))
    session_id = await session_of(client, ACME)
    sent = asyncio.create_task(
        client.post(
            f"/sessions/{session_id}/messages",
            params={"wait": "true", "timeout": 30},
            json={"text": "Hi"},
            headers=ACME,
        )
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not fake_llm.requests:  # the turn reached the model: the request holds its slot
        assert loop.time() < deadline and not sent.done(), "the turn never reached the model"
        await asyncio.sleep(0.02)
    return sent


async def test_a_second_heavy_request_of_the_tenant_gets_429_with_retry_after(
    capped: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    _, client = capped
    sent = await held_message(client, fake_llm, gate)
    jobs_before = await jobs_of(client, ACME)

    refused = await client.post("/jobs", json={"instruction": "Do it."}, headers=ACME)

    assert refused.status_code == 429
    assert refused.headers["content-type"] == PROBLEM
    assert refused.headers["retry-after"] == "7"
    assert refused.json()["type"] == "urn:strata:problem:too-many-requests"
    assert "STRATA_TENANT_MAX_CONCURRENT_HEAVY" in refused.json()["detail"]
    assert await jobs_of(client, ACME) == jobs_before
    gate.set()
    assert (await sent).status_code == 200


async def test_every_heavy_endpoint_shares_the_tenants_slots(
    capped: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    _, client = capped
    sent = await held_message(client, fake_llm, gate)
    other_session = await session_of(client, ACME)

    hook = await session_start(client, ACME)
    message = await client.post(
        f"/sessions/{other_session}/messages", json={"text": "Hi"}, headers=ACME
    )

    assert (hook.status_code, message.status_code) == (429, 429)
    gate.set()
    await sent


async def test_another_tenant_is_not_affected(
    capped: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    _, client = capped
    sent = await held_message(client, fake_llm, gate)

    response = await session_start(client, GLOBEX)

    assert response.status_code == 200, response.text
    gate.set()
    await sent


async def test_the_slot_is_released_when_the_request_ends(
    capped: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeMessagesAPI, gate: threading.Event
) -> None:
    app, client = capped
    sent = await held_message(client, fake_llm, gate)
    gate.set()
    assert (await sent).status_code == 200

    response = await session_start(client, ACME)

    assert response.status_code == 200, response.text
    assert app.state.heavy_gate.in_flight("acme") == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/sessions/ses_missing/messages", {"text": "Hi"}, 404),
        ("post", "/jobs", {"instruction": "Do it.", "piece": "no-such-piece"}, 422),
        ("post", "/hooks/claude-code", {"hook_event_name": "Stop", "session_id": "cc"}, 422),
        ("post", "/jobs", {"instruction": ""}, 422),
    ],
)
async def test_the_slot_is_released_after_an_error(
    capped: tuple[FastAPI, httpx.AsyncClient], method: str, path: str, body: Any, status: int
) -> None:
    app, client = capped

    failed = await client.request(method, path, json=body, headers=ACME)
    after = await session_start(client, ACME)

    assert failed.status_code == status, failed.text
    assert after.status_code == 200, after.text
    assert app.state.heavy_gate.in_flight("acme") == 0
