from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from app.services.auth import create_key
from tests.support.apps import serve

PROBLEM = "application/problem+json"
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}


@pytest.fixture
async def keyed(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A server with two tenants' keys in settings: acme (key-a) and globex (key-b)."""
    async with serve(make_settings(api_keys="acme:key-a,globex:key-b")) as (_, c):
        yield c


async def acme_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/sessions", json={}, headers=ACME)
    assert response.status_code == 201
    session_id: str = response.json()["id"]
    return session_id


async def test_without_keys_requests_need_no_authorization(client: httpx.AsyncClient) -> None:
    created = await client.post("/sessions", json={})

    assert created.status_code == 201
    assert (await client.get(f"/sessions/{created.json()['id']}")).status_code == 200
    assert (await client.get("/sessions")).json()["data"][0]["id"] == created.json()["id"]


async def test_without_keys_a_bearer_token_is_ignored(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions", headers={"Authorization": "Bearer anything"})

    assert response.status_code == 200


async def test_missing_key_is_401_problem_with_bearer_challenge(
    keyed: httpx.AsyncClient,
) -> None:
    response = await keyed.get("/sessions")

    assert response.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["type"] == "urn:strata:problem:unauthorized"


async def test_wrong_key_is_401(keyed: httpx.AsyncClient) -> None:
    response = await keyed.get("/sessions", headers={"Authorization": "Bearer key-c"})

    assert response.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == "Bearer"


async def test_non_bearer_authorization_is_401(keyed: httpx.AsyncClient) -> None:
    response = await keyed.get("/sessions", headers={"Authorization": "Basic a2V5LWE6"})

    assert response.status_code == 401


async def test_missing_key_is_401_on_writes_too(keyed: httpx.AsyncClient) -> None:
    response = await keyed.post("/sessions", json={})

    assert response.status_code == 401
    assert (await keyed.get("/sessions", headers=ACME)).json()["data"] == []


async def test_valid_key_is_accepted(keyed: httpx.AsyncClient) -> None:
    response = await keyed.get("/sessions", headers=ACME)

    assert response.status_code == 200


async def test_health_endpoints_need_no_key(keyed: httpx.AsyncClient) -> None:
    assert (await keyed.get("/healthz")).status_code == 200
    assert (await keyed.get("/readyz")).status_code == 200


async def test_other_tenants_session_is_404_on_get(keyed: httpx.AsyncClient) -> None:
    session_id = await acme_session(keyed)

    response = await keyed.get(f"/sessions/{session_id}", headers=GLOBEX)

    assert response.status_code == 404
    assert response.json()["type"] == "urn:strata:problem:not-found"


async def test_other_tenants_session_is_404_on_patch(keyed: httpx.AsyncClient) -> None:
    session_id = await acme_session(keyed)

    response = await keyed.patch(f"/sessions/{session_id}", json={"title": "x"}, headers=GLOBEX)

    assert response.status_code == 404
    assert (await keyed.get(f"/sessions/{session_id}", headers=ACME)).json()["title"] is None


async def test_other_tenants_items_are_404_on_list(keyed: httpx.AsyncClient) -> None:
    session_id = await acme_session(keyed)

    response = await keyed.get(f"/sessions/{session_id}/items", headers=GLOBEX)

    assert response.status_code == 404


async def test_other_tenants_items_are_404_on_append(keyed: httpx.AsyncClient) -> None:
    session_id = await acme_session(keyed)

    response = await keyed.post(
        f"/sessions/{session_id}/items",
        json={"kind": "user_message", "text": "hi"},
        headers=GLOBEX,
    )

    assert response.status_code == 404
    assert (await keyed.get(f"/sessions/{session_id}", headers=ACME)).json()["item_count"] == 0


async def test_other_tenants_tasks_are_404_on_create(keyed: httpx.AsyncClient) -> None:
    """A task write checks the tenant with the statement that takes the item's `seq`;
    that allocation is rolled back with the refused write."""
    session_id = await acme_session(keyed)
    before = (await keyed.get(f"/sessions/{session_id}", headers=ACME)).json()

    response = await keyed.post(
        f"/sessions/{session_id}/tasks", json={"subject": "x"}, headers=GLOBEX
    )

    assert response.status_code == 404
    assert (await keyed.get(f"/sessions/{session_id}/tasks", headers=ACME)).json()["data"] == []
    assert (await keyed.get(f"/sessions/{session_id}", headers=ACME)).json() == before


async def test_other_tenants_session_is_404_on_compact(keyed: httpx.AsyncClient) -> None:
    session_id = await acme_session(keyed)

    response = await keyed.post(f"/sessions/{session_id}/compact", headers=GLOBEX)

    assert response.status_code == 404


async def test_other_tenants_sessions_are_not_listed(keyed: httpx.AsyncClient) -> None:
    acme_id = await acme_session(keyed)
    globex_id = (await keyed.post("/sessions", json={}, headers=GLOBEX)).json()["id"]

    globex_list = (await keyed.get("/sessions", headers=GLOBEX)).json()["data"]
    acme_list = (await keyed.get("/sessions", headers=ACME)).json()["data"]

    assert [s["id"] for s in globex_list] == [globex_id]
    assert [s["id"] for s in acme_list] == [acme_id]


async def test_hashed_key_in_settings_authenticates(make_settings: Any) -> None:
    digest = hashlib.sha256(b"key-h").hexdigest()

    async with serve(make_settings(api_keys=f"acme:sha256:{digest}")) as (_, c):
        accepted = await c.get("/sessions", headers={"Authorization": "Bearer key-h"})
        refused = await c.get("/sessions", headers={"Authorization": f"Bearer sha256:{digest}"})

    assert accepted.status_code == 200
    assert refused.status_code == 401


async def test_stored_key_authenticates_as_its_tenant(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    _, key = await app.state.database.write(lambda db: create_key(db, "initech"))
    headers = {"Authorization": f"Bearer {key}"}

    created = await client.post("/sessions", json={}, headers=headers)
    listed = await client.get("/sessions", headers=headers)

    assert created.status_code == 201
    assert [s["id"] for s in listed.json()["data"]] == [created.json()["id"]]


async def test_stored_key_turns_authentication_on(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.get("/sessions")).status_code == 200
    await app.state.database.write(lambda db: create_key(db, "initech"))

    response = await client.get("/sessions")

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


async def test_stored_key_sees_only_its_tenants_sessions(make_settings: Any) -> None:
    async with serve(make_settings(api_keys="acme:key-a")) as (application, c):
        _, key = await application.state.database.write(lambda db: create_key(db, "initech"))
        acme_id = await acme_session(c)
        response = await c.get(f"/sessions/{acme_id}", headers={"Authorization": f"Bearer {key}"})

    assert response.status_code == 404


async def test_database_stores_only_the_key_hash(app: FastAPI) -> None:
    _, key = await app.state.database.write(lambda db: create_key(db, "initech"))

    async with app.state.database.read() as db:
        connection = await db.connection()
        rows = (await connection.execute(text("SELECT * FROM api_keys"))).all()

    assert len(rows) == 1
    stored = [str(value) for value in rows[0]]
    assert key not in stored
    assert not any(key in value for value in stored)
    assert hashlib.sha256(key.encode()).hexdigest() in stored
