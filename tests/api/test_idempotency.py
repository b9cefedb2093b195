"""Idempotency-Key on the five creating POSTs: a retry returns the first answer."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from tests.support.apps import serve
from tests.support.chat import new_session, wait_until


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


async def test_retrying_session_creation_returns_the_first_session(
    client: httpx.AsyncClient,
) -> None:
    first = await client.post("/sessions", json={"title": "a"}, headers=_key("k1"))
    again = await client.post("/sessions", json={"title": "a"}, headers=_key("k1"))

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len((await client.get("/sessions")).json()["data"]) == 1


async def test_the_same_key_with_another_body_is_422(client: httpx.AsyncClient) -> None:
    await client.post("/sessions", json={"title": "a"}, headers=_key("k1"))

    other = await client.post("/sessions", json={"title": "b"}, headers=_key("k1"))

    assert other.status_code == 422
    assert "Idempotency-Key" in other.json()["detail"]


async def test_json_bodies_match_by_content_not_by_formatting(client: httpx.AsyncClient) -> None:
    first = await client.post(
        "/sessions",
        content=b'{"title": "a", "metadata": {"x": 1}}',
        headers={**_key("k"), "content-type": "application/json"},
    )
    again = await client.post(
        "/sessions",
        content=b'{"metadata":{"x":1},"title":"a"}',
        headers={**_key("k"), "content-type": "application/json"},
    )

    assert again.json()["id"] == first.json()["id"]


async def test_keys_are_per_tenant_and_requests_without_a_key_are_not_deduplicated(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/sessions", json={}, headers=_key("k"))
    await client.post("/sessions", json={})
    await client.post("/sessions", json={})

    assert len((await client.get("/sessions")).json()["data"]) == 3


async def test_an_expired_key_runs_the_request_again(make_settings: Any) -> None:
    async with serve(make_settings(idempotency_ttl_seconds=0)) as (_, client):
        first = await client.post("/sessions", json={}, headers=_key("k"))
        second = await client.post("/sessions", json={}, headers=_key("k"))

        assert first.json()["id"] != second.json()["id"]


async def test_task_creation_is_idempotent(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    url = f"/sessions/{session_id}/tasks"

    first = await client.post(url, json={"subject": "x"}, headers=_key("t"))
    again = await client.post(url, json={"subject": "x"}, headers=_key("t"))

    assert again.json() == first.json()
    assert len((await client.get(url)).json()["data"]) == 1


async def test_a_retried_message_enqueues_one_turn(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    url = f"/sessions/{session_id}/messages"

    first = await client.post(url, json={"text": "hi"}, headers=_key("m"))
    again = await client.post(url, json={"text": "hi"}, headers=_key("m"))

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["job_id"] == first.json()["job_id"]
    jobs = (await client.get("/jobs", params={"session_id": session_id})).json()["data"]
    assert len(jobs) == 1


async def test_job_submission_and_comments_are_idempotent(client: httpx.AsyncClient) -> None:
    first = await client.post("/jobs", json={"instruction": "do it"}, headers=_key("j"))
    again = await client.post("/jobs", json={"instruction": "do it"}, headers=_key("j"))
    assert again.json()["id"] == first.json()["id"]
    job_id = first.json()["id"]

    c1 = await client.post(f"/jobs/{job_id}/comments", json={"body": "hi"}, headers=_key("c"))
    c2 = await client.post(f"/jobs/{job_id}/comments", json={"body": "hi"}, headers=_key("c"))

    assert c2.json() == c1.json()
    assert len((await client.get(f"/jobs/{job_id}/comments")).json()["data"]) == 1
    assert len((await client.get("/jobs")).json()["data"]) == 1


async def test_concurrent_requests_with_one_key_create_one_session(
    client: httpx.AsyncClient,
) -> None:
    answers = await asyncio.gather(
        *(client.post("/sessions", json={"title": "race"}, headers=_key("r")) for _ in range(8))
    )

    ids = {a.json()["id"] for a in answers if a.status_code == 201}
    assert len(ids) == 1
    assert {a.status_code for a in answers} <= {201, 409}
    assert len((await client.get("/sessions")).json()["data"]) == 1


async def test_an_oversized_key_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions", json={}, headers=_key("x" * 300))

    assert response.status_code == 422


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_expired_keys_are_purged_without_being_reused(make_settings: Any) -> None:
    settings = make_settings(idempotency_ttl_seconds=3600, idempotency_purge_seconds=0.05)
    async with serve(settings) as (app, client):
        await client.post("/sessions", json={}, headers=_key("old"))
        await client.post("/sessions", json={}, headers=_key("fresh"))

        async def keys() -> list[str]:
            async with app.state.database.read() as db:
                result = await db.exec(text("SELECT key FROM idempotency_keys ORDER BY key"))
                return [row[0] for row in result]

        async def expire_old(db: Any) -> None:
            await db.exec(
                text("UPDATE idempotency_keys SET expires_at = :past WHERE key = 'old'"),
                params={"past": "2000-01-01 00:00:00+00:00"},
            )

        assert await keys() == ["fresh", "old"]
        await app.state.database.write(expire_old)

        async def purged() -> bool:
            return await keys() == ["fresh"]

        await wait_until(purged)
