from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support.apps import serve

PROBLEM = "application/problem+json"
SECRET = "internal-detail-4f1c"


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is an RFC 9457 problem document with every required member."""
    assert response.status_code == status
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    assert problem["type"].startswith("urn:strata:problem:")
    assert isinstance(problem["title"], str)
    assert problem["title"]
    assert problem["status"] == status
    assert isinstance(problem["detail"], str)
    assert problem["detail"]
    return problem


@pytest.fixture
async def small_limit(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A server that refuses request bodies over 1000 bytes."""
    async with serve(make_settings(max_body_bytes=1000)) as (_, c):
        yield c


async def chunks(count: int, size: int) -> AsyncIterator[bytes]:
    yield b'{"title": "'
    for _ in range(count):
        yield b"x" * size
    yield b'"}'


async def test_unknown_route_is_404_problem(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.get("/no-such-route"), 404)

    assert problem["type"] == "urn:strata:problem:not-found"


async def test_wrong_method_is_405_problem(client: httpx.AsyncClient) -> None:
    response = await client.delete("/sessions")

    problem = assert_problem(response, 405)
    assert problem["type"] == "urn:strata:problem:method-not-allowed"
    assert "allow" in response.headers


async def test_body_over_the_limit_with_content_length_is_413(
    small_limit: httpx.AsyncClient,
) -> None:
    response = await small_limit.post("/sessions", json={"title": "x" * 2000})

    problem = assert_problem(response, 413)
    assert problem["type"] == "urn:strata:problem:payload-too-large"
    assert "1000" in problem["detail"]


async def test_streamed_body_over_the_limit_is_413(small_limit: httpx.AsyncClient) -> None:
    request = small_limit.build_request(
        "POST",
        "/sessions",
        content=chunks(count=10, size=200),
        headers={"content-type": "application/json"},
    )
    assert "content-length" not in request.headers

    response = await small_limit.send(request)

    problem = assert_problem(response, 413)
    assert problem["type"] == "urn:strata:problem:payload-too-large"


async def test_streamed_body_under_the_limit_is_accepted(small_limit: httpx.AsyncClient) -> None:
    response = await small_limit.post(
        "/sessions",
        content=chunks(count=4, size=100),
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 201
    assert response.json()["title"] == "x" * 400


async def test_nothing_is_written_when_the_body_is_too_large(
    small_limit: httpx.AsyncClient,
) -> None:
    await small_limit.post(
        "/sessions",
        content=chunks(count=10, size=200),
        headers={"content-type": "application/json"},
    )

    assert (await small_limit.get("/sessions")).json()["data"] == []


async def test_unexpected_exception_is_500_problem_without_internals(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    async def boom() -> None:
        raise RuntimeError(SECRET)

    app.add_api_route("/boom", boom, tags=["test"])

    response = await client.get("/boom")

    problem = assert_problem(response, 500)
    assert problem["type"] == "urn:strata:problem:internal-error"
    assert problem["reference"]
    assert problem["reference"] in problem["detail"]
    assert SECRET not in response.text
    assert "RuntimeError" not in response.text
    assert "Traceback" not in response.text


async def test_validation_problem_has_every_member(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.post("/sessions", json={"title": 1}), 422)

    assert problem["errors"]
