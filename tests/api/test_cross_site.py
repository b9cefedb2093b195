"""A keyless server refuses what a page of another site makes the browser send: changes
(403 `cross-site-request`) and requests under a name of that site's (403
`host-not-allowed`, a DNS-rebinding page's reads); its own pages, and clients that are
not browsers, go on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.test_errors import assert_problem
from tests.support.apps import serve

EVIL = "https://evil.example"
OWN = {"Host": "localhost:8000"}


@pytest.fixture
async def loopback(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A keyless server as `make serve` starts it: bound to 127.0.0.1, no public name."""
    async with serve(make_settings(allowed_hosts="")) as (_, client):
        yield client


async def session_titles(client: httpx.AsyncClient) -> list[str]:
    listed = await client.get("/sessions", headers=OWN)
    return [session["title"] for session in listed.json()["data"]]


async def test_a_post_with_another_sites_origin_is_refused(
    loopback: httpx.AsyncClient,
) -> None:
    answer = await loopback.post(
        "/sessions", json={"title": "planted"}, headers={**OWN, "Origin": EVIL}
    )

    problem = assert_problem(answer, 403)
    assert problem["type"] == "urn:strata:problem:cross-site-request"
    assert await session_titles(loopback) == []


async def test_a_body_less_post_marked_cross_site_is_refused(
    loopback: httpx.AsyncClient,
) -> None:
    created = await loopback.post("/sessions", json={}, headers=OWN)
    compact = f"/sessions/{created.json()['id']}/compact"

    answer = await loopback.post(compact, headers={**OWN, "Sec-Fetch-Site": "cross-site"})

    problem = assert_problem(answer, 403)
    assert problem["type"] == "urn:strata:problem:cross-site-request"


async def test_a_delete_marked_cross_site_is_refused(loopback: httpx.AsyncClient) -> None:
    created = await loopback.post("/sessions", json={"title": "kept"}, headers=OWN)

    answer = await loopback.delete(
        f"/sessions/{created.json()['id']}", headers={**OWN, "Sec-Fetch-Site": "cross-site"}
    )

    assert assert_problem(answer, 403)["type"] == "urn:strata:problem:cross-site-request"
    assert await session_titles(loopback) == ["kept"]


async def test_a_request_under_another_host_name_is_refused(
    loopback: httpx.AsyncClient,
) -> None:
    await loopback.post("/sessions", json={"title": "private"}, headers=OWN)

    answer = await loopback.get("/sessions", headers={"Host": "evil.example:8000"})

    problem = assert_problem(answer, 403)
    assert problem["type"] == "urn:strata:problem:host-not-allowed"
    assert "private" not in answer.text


async def test_a_post_from_the_servers_own_origin_goes_on(loopback: httpx.AsyncClient) -> None:
    answer = await loopback.post(
        "/sessions", json={}, headers={**OWN, "Origin": "http://localhost:8000"}
    )

    assert answer.status_code == 201


@pytest.mark.parametrize("fetch_site", ["same-origin", "none"])
async def test_a_post_the_browser_marks_as_its_own_goes_on(
    loopback: httpx.AsyncClient, fetch_site: str
) -> None:
    answer = await loopback.post(
        "/sessions", json={}, headers={**OWN, "Sec-Fetch-Site": fetch_site}
    )

    assert answer.status_code == 201


async def test_a_post_without_origin_or_fetch_metadata_goes_on(
    loopback: httpx.AsyncClient,
) -> None:
    assert (await loopback.post("/sessions", json={}, headers=OWN)).status_code == 201


async def test_a_get_from_another_sites_origin_goes_on(loopback: httpx.AsyncClient) -> None:
    answer = await loopback.get(
        "/sessions", headers={**OWN, "Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
    )

    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers


async def test_a_post_from_an_origin_cors_allows_goes_on(make_settings: Any) -> None:
    origin = "http://localhost:5173"
    settings = make_settings(allowed_hosts="", cors_origins=origin)
    async with serve(settings) as (_, client):
        answer = await client.post(
            "/sessions", json={}, headers={**OWN, "Origin": origin, "Sec-Fetch-Site": "same-site"}
        )

    assert answer.status_code == 201
    assert answer.headers["access-control-allow-origin"] == origin


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1:8000", "[::1]:8000"])
async def test_loopback_names_are_answered(loopback: httpx.AsyncClient, host: str) -> None:
    assert (await loopback.get("/sessions", headers={"Host": host})).status_code == 200


async def test_the_bind_address_is_answered(make_settings: Any) -> None:
    async with serve(make_settings(allowed_hosts="", host="192.0.2.10")) as (_, client):
        answer = await client.get("/healthz", headers={"Host": "192.0.2.10:8000"})

    assert answer.status_code == 200


async def test_a_configured_public_host_is_answered(make_settings: Any) -> None:
    settings = make_settings(allowed_hosts="strata.example.com", host="0.0.0.0")
    async with serve(settings) as (_, client):
        answer = await client.get("/healthz", headers={"Host": "strata.example.com"})

    assert answer.status_code == 200


async def test_the_consoles_own_requests_into_the_api_are_answered(
    loopback: httpx.AsyncClient,
) -> None:
    await loopback.post("/sessions", json={"title": "listed"}, headers=OWN)

    page = await loopback.get("/console/sessions", headers=OWN)

    assert page.status_code == 200
    assert "listed" in page.text
