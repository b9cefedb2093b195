"""Every answer names its request id (`X-Request-ID`), the one the client sent when it is sane."""

from __future__ import annotations

import httpx


async def test_an_answer_carries_a_new_request_id(client: httpx.AsyncClient) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")

    assert len(first.headers["x-request-id"]) == 32
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_a_clients_request_id_is_kept(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_nope", headers={"x-request-id": "trace-42.a:b"})

    assert response.status_code == 404
    assert response.headers["x-request-id"] == "trace-42.a:b"


async def test_an_unsafe_request_id_is_replaced(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"x-request-id": "a b<script>" + "x" * 200})

    assert response.headers["x-request-id"] != "a b"
    assert len(response.headers["x-request-id"]) == 32
