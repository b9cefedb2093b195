"""Browsers can use the API: CORS for the configured origins only, and documentation pages
whose assets come from the server itself."""

from __future__ import annotations

import re
from typing import Any

from app.main import CORS_EXPOSED_HEADERS
from tests.support.apps import serve

ORIGIN = "http://localhost:5173"
PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
}


async def test_a_preflight_from_a_configured_origin_is_allowed(make_settings: Any) -> None:
    async with serve(make_settings(cors_origins=ORIGIN)) as (_, client):
        response = await client.options("/sessions", headers=PREFLIGHT)

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed = response.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "idempotency-key", "last-event-id"} <= {
        h.strip() for h in allowed.split(",")
    }
    assert response.headers["access-control-max-age"] == "600"


async def test_a_preflight_from_another_origin_is_refused(make_settings: Any) -> None:
    async with serve(make_settings(cors_origins=ORIGIN)) as (_, client):
        response = await client.options(
            "/sessions", headers={**PREFLIGHT, "Origin": "http://evil.example"}
        )

    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


async def test_no_origin_is_allowed_by_default(make_settings: Any) -> None:
    async with serve(make_settings()) as (_, client):
        preflight = await client.options("/sessions", headers=PREFLIGHT)
        simple = await client.get("/healthz", headers={"Origin": ORIGIN})

    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers
    assert "access-control-allow-origin" not in simple.headers


async def test_answers_expose_the_headers_a_browser_client_reads(make_settings: Any) -> None:
    async with serve(make_settings(cors_origins=ORIGIN)) as (_, client):
        created = await client.post("/sessions", json={}, headers={"Origin": ORIGIN})
        missing = await client.get("/sessions/ses_missing", headers={"Origin": ORIGIN})

    assert created.status_code == 201
    assert created.headers["access-control-allow-origin"] == ORIGIN
    exposed = {
        h.strip().lower() for h in created.headers["access-control-expose-headers"].split(",")
    }
    assert {h.lower() for h in CORS_EXPOSED_HEADERS} <= exposed
    assert {"location", "retry-after", "idempotent-replayed", "x-request-id"} <= exposed
    assert missing.status_code == 404  # errors carry CORS headers too, or a page cannot read them
    assert missing.headers["access-control-allow-origin"] == ORIGIN


async def test_swagger_ui_and_redoc_load_only_assets_the_server_serves(
    make_settings: Any,
) -> None:
    async with serve(make_settings()) as (_, client):
        pages = {path: (await client.get(path)).text for path in ("/docs", "/redoc")}
        assets = re.findall(r'(?:src|href)="([^"]+)"', pages["/docs"] + pages["/redoc"])
        fetched = {url: await client.get(url) for url in assets}

    assert len(assets) >= 4
    assert all(url.startswith("/docs/assets/") for url in assets), assets
    assert all(r.status_code == 200 and r.content for r in fetched.values())
    assert not re.search(r"https?://", pages["/docs"] + pages["/redoc"])


async def test_the_documentation_pages_may_load_from_the_server_only(make_settings: Any) -> None:
    """A policy the browser enforces: a remote URL in a vendored viewer (ReDoc's logo from
    cdn.redoc.ly, Swagger UI's validator badge) is refused, not fetched."""
    async with serve(make_settings()) as (_, client):
        pages = {path: await client.get(path) for path in ("/docs", "/redoc")}

    for path, page in pages.items():
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy, path
        assert not re.search(r"https?:|\*", policy), (path, policy)
    assert '"validatorUrl": null' in pages["/docs"].text
