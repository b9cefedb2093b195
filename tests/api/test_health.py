from __future__ import annotations

from typing import Any

import httpx

import app as app_package
from app.db.migrate import head_revision
from app.wiring import runtime
from tests.support.apps import serve

PROBLEM = "application/problem+json"


async def test_healthz_is_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": app_package.__version__}


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
    async with serve(make_settings(anthropic_base_url="http://127.0.0.1:9")) as (_, c):
        response = await c.get("/readyz")

    assert response.status_code == 200
    assert response.json()["llm"] == "configured"


async def test_readyz_is_503_on_a_database_never_migrated(
    make_settings: Any, empty_database_url: str
) -> None:
    settings = make_settings(database_url=empty_database_url)

    async with serve(settings) as (_, c):
        response = await c.get("/readyz")

    assert response.status_code == 503
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == "urn:strata:problem:migrations-pending"
    assert problem["status"] == 503
    assert problem["detail"]


async def test_readyz_is_503_and_names_a_background_loop_that_stopped_coming_round(
    make_settings: Any,
) -> None:
    async with serve(make_settings(background_stall_seconds=5.0)) as (app, c):
        ready = await c.get("/readyz")
        runner = app.state.runtime.runner
        runner.ticked_at -= 60  # as if its loop had been stuck for a minute
        stalled = await c.get("/readyz")

    assert ready.status_code == 200
    assert stalled.status_code == 503
    assert stalled.headers["content-type"] == PROBLEM
    body = stalled.json()
    assert body["type"] == "urn:strata:problem:background-stalled"
    assert body["stalled"] == ["runner"]


async def test_readyz_tells_a_caller_without_a_key_only_the_status(make_settings: Any) -> None:
    async with serve(make_settings(api_keys="acme:key-a")) as (_, c):
        anonymous = await c.get("/readyz")
        wrong = await c.get("/readyz", headers={"Authorization": "Bearer nope"})
        known = await c.get("/readyz", headers={"Authorization": "Bearer key-a"})

    assert anonymous.status_code == wrong.status_code == 200
    assert anonymous.json() == wrong.json() == {"status": "ready"}
    assert known.json()["migration"] == head_revision()
    assert known.json()["llm"] == "not_configured"


async def test_readyz_hides_the_migration_ids_of_a_behind_database_from_a_caller_without_a_key(
    make_settings: Any, empty_database_url: str
) -> None:
    settings = make_settings(database_url=empty_database_url, api_keys="acme:key-a")

    async with serve(settings) as (_, c):
        response = await c.get("/readyz")

    assert response.status_code == 503
    assert response.json()["type"] == "urn:strata:problem:migrations-pending"
    assert str(head_revision()) not in response.text


async def test_start_up_says_once_that_no_llm_is_configured(
    make_settings: Any, caplog: Any
) -> None:
    async with serve(make_settings()):
        pass
    async with serve(make_settings(anthropic_base_url="http://127.0.0.1:9")):
        pass

    lines = [r.getMessage() for r in caplog.records if "no LLM is configured" in r.getMessage()]
    assert len(lines) == 1
    assert "ANTHROPIC_API_KEY" in lines[0]


async def test_a_worker_without_an_llm_says_so_at_start_up(make_settings: Any, caplog: Any) -> None:
    """`strata worker` is the process that calls the LLM: it warns as the API does."""
    async with runtime(make_settings(), with_runner=True):
        pass

    lines = [r.getMessage() for r in caplog.records if "no LLM is configured" in r.getMessage()]
    assert len(lines) == 1
