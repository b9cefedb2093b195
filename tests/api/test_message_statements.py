"""`POST /sessions/{id}/messages` is one statement unit of prepared statements, like an
agent step, with a statement budget (counted, never timed): the tenant's check is the
turn's reservation, and the user item's place is taken before the job is written, so
the job's row is written once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.support.apps import client_for
from tests.support.chat import new_session

# SQLite: the admission count, the turn, the busy check, the item's place, the job, the
# item, the events; and the unit's BEGIN. PostgreSQL: its admission lock instead of a BEGIN.
BUDGET = 8
# an Idempotency-Key's look-up and its row
KEYED = 2


@pytest.fixture
async def quiet_app(make_settings: Any) -> AsyncIterator[FastAPI]:
    """The API without a runner in its process: nothing but the request writes."""
    application = create_app(make_settings(run_worker_in_server=False))
    async with application.router.lifespan_context(application):
        yield application


async def statements_of_a_message(app: FastAPI, headers: dict[str, str]) -> int:
    async with client_for(app) as client:
        session_id = await new_session(client)
        stats = app.state.database.stats
        before = stats.snapshot()
        response = await client.post(
            f"/sessions/{session_id}/messages", json={"text": "Hello."}, headers=headers
        )
        assert response.status_code == 202, response.text
        return int(stats.since(before).statements)


async def test_a_message_to_an_idle_session_stays_within_its_statement_budget(
    quiet_app: FastAPI,
) -> None:
    assert await statements_of_a_message(quiet_app, {}) <= BUDGET


async def test_a_keyed_message_adds_only_its_keys_statements(quiet_app: FastAPI) -> None:
    assert await statements_of_a_message(quiet_app, {"Idempotency-Key": "k-1"}) <= BUDGET + KEYED


async def test_a_message_is_logged_with_its_job_holding_the_items_place(
    quiet_app: FastAPI,
) -> None:
    async with client_for(quiet_app) as client:
        session_id = await new_session(client)
        sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "Hi."})
        answer = sent.json()
        items = (await client.get(f"/sessions/{session_id}/items")).json()["data"]

    assert [(item["seq"], item["kind"]) for item in items] == [(1, "user_message")]
    assert answer["job"]["status"] == "queued"
    assert answer["turn"] == 1


async def test_a_message_to_a_missing_session_is_404(quiet_app: FastAPI) -> None:
    async with client_for(quiet_app) as c:
        response = await c.post("/sessions/ses_missing/messages", json={"text": "Hi."})

    assert response.status_code == 404
