"""A database outage in the server's log: one line when it starts, one when it is over,
however many requests met it."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from app.main import create_app
from tests.support.apps import BASE_URL
from tests.support.chat import wait_until
from tests.support.outages import ServedLikeUvicorn, database_outage

pytestmark = pytest.mark.timeout(90)

REQUESTS_DURING = 20
BACK = "database available again"


async def test_an_outage_met_by_many_requests_is_logged_once_and_its_end_once(
    make_settings: Any, database_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = make_settings(sqlite_busy_timeout_ms=100)
    app = create_app(settings)
    transport = httpx.ASGITransport(app=ServedLikeUvicorn(app), raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client,
    ):
        session_id = (await client.post("/sessions", json={})).json()["id"]
        first = len(caplog.records)
        with database_outage(database_factory, settings):
            refused = [await client.post("/sessions", json={}) for _ in range(REQUESTS_DURING // 2)]
            for _ in range(REQUESTS_DURING // 2):
                await client.get(f"/sessions/{session_id}")

        async def back() -> bool:
            # a write and a read each round: the outage is over once both succeed again
            await client.post("/sessions", json={})
            await client.get(f"/sessions/{session_id}")
            return any(BACK in r.getMessage() for r in caplog.records[first:])

        await wait_until(back, seconds=30)

    logged = caplog.records[first:]
    loud = [r for r in logged if r.levelno >= logging.WARNING]
    assert {r.status_code for r in refused} == {503}
    assert [r.getMessage().split(" (")[0] for r in loud] == ["database unavailable"]
    assert [r for r in logged if r.exc_info] == []
    assert [r.levelname for r in logged if BACK in r.getMessage()] == ["INFO"]
