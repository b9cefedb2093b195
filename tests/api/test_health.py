from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from app.db.migrate import head_revision
from app.main import create_app
from app.settings import Settings

PROBLEM = "application/problem+json"


@asynccontextmanager
async def serve(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A started app (its lifespan run) and a client talking to it."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
            yield c


async def test_healthz_is_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_the_head_migration(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["database"] == "ok"
    assert body["migration"] == head_revision()
    assert body["migration"]


async def test_readyz_reports_an_unconfigured_llm(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")

    assert response.json()["llm"] == "not_configured"


async def test_readyz_reports_a_configured_llm(make_settings: Any) -> None:
    async with serve(make_settings(anthropic_base_url="http://127.0.0.1:9")) as c:
        response = await c.get("/readyz")

    assert response.status_code == 200
    assert response.json()["llm"] == "configured"


async def test_readyz_is_503_on_a_database_never_migrated(
    make_settings: Any, empty_database_url: str
) -> None:
    settings = make_settings(database_url=empty_database_url)

    async with serve(settings) as c:
        response = await c.get("/readyz")

    assert response.status_code == 503
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == "urn:strata:problem:migrations-pending"
    assert problem["status"] == 503
    assert problem["detail"]
