"""`GET /sessions/{id}/items` reads the session's row once: the tenant's check and the
lineage (fork ranges) are one prepared statement, counted (never timed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.db.repositories.sessions import SessionRepository
from app.main import create_app
from tests.support.apps import client_for
from tests.support.chat import new_session

# Past a read of one statement (SQLite's count has the unit's BEGIN, PostgreSQL's not): the
# page of items, the session's tenant and lineage being that one statement.
BEYOND_ONE = 1
# a fork's page: its parent's items up to the fork, then its own
FORK_BEYOND_ONE = BEYOND_ONE + 1


@pytest.fixture
async def quiet_app(make_settings: Any) -> AsyncIterator[FastAPI]:
    """The API without a runner in its process: nothing but the request reads."""
    application = create_app(make_settings(run_worker_in_server=False))
    async with application.router.lifespan_context(application):
        yield application


async def statements_of_a_page(app: FastAPI, client: httpx.AsyncClient, session_id: str) -> int:
    stats = app.state.database.stats
    before = stats.snapshot()
    response = await client.get(f"/sessions/{session_id}/items")
    assert response.status_code == 200, response.text
    return int(stats.since(before).statements)


async def statements_of_one_read(app: FastAPI) -> int:
    database = app.state.database
    before = database.stats.snapshot()
    async with database.read() as db:
        await SessionRepository(db).tenant_of("ses_none")
    return int(database.stats.since(before).statements)


async def appended(client: httpx.AsyncClient, session_id: str, text: str) -> None:
    item = {"kind": "user_message", "text": text}
    response = await client.post(f"/sessions/{session_id}/items", json=item)
    assert response.status_code == 201, response.text


async def test_a_page_of_items_reads_the_session_row_once(quiet_app: FastAPI) -> None:
    async with client_for(quiet_app) as client:
        session_id = await new_session(client)
        await appended(client, session_id, "Hello.")

        one = await statements_of_one_read(quiet_app)

        assert await statements_of_a_page(quiet_app, client, session_id) <= one + BEYOND_ONE


async def test_a_page_of_a_forks_items_reads_the_session_row_once(quiet_app: FastAPI) -> None:
    async with client_for(quiet_app) as client:
        parent = await new_session(client)
        await appended(client, parent, "Hello.")
        forked = await client.post(f"/sessions/{parent}/fork", json={"at_seq": 1})
        assert forked.status_code == 201, forked.text
        child = forked.json()["id"]
        await appended(client, child, "Again.")

        one = await statements_of_one_read(quiet_app)

        assert await statements_of_a_page(quiet_app, client, child) <= one + FORK_BEYOND_ONE
