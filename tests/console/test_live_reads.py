"""What a session page's live stream reads of the API when a turn ends: the regions the end
marks (the header's status, the usage, the timeline) are rendered from one read of the
session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi import FastAPI

from app.console.api import PublicApi
from app.console.live import SessionFeed
from app.console.render import Renderer
from app.console.sse import StreamEvent
from app.main import create_app
from tests.support.apps import client_for
from tests.support.chat import new_session


@pytest.fixture
async def quiet_app(make_settings: Any) -> AsyncIterator[FastAPI]:
    """The API without a runner in its process: a sent message's turn stays queued."""
    application = create_app(make_settings(run_worker_in_server=False))
    async with application.router.lifespan_context(application):
        yield application


async def test_a_turns_end_reads_the_session_once(quiet_app: FastAPI) -> None:
    async with client_for(quiet_app) as client:
        session_id = await new_session(client)
        sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "Hi."})
        assert sent.status_code == 202, sent.text
        job_id = sent.json()["job"]["id"]
    paths: list[str] = []

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        paths.append(scope["path"])
        await quiet_app(scope, receive, send)

    feed = SessionFeed(
        PublicApi(counted, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False,
        session_id=session_id,
    )  # fmt: skip
    ended = {"job_id": job_id, "status": "succeeded"}
    await feed.take(StreamEvent("9", "job.status", json.dumps(ended)))
    html = await feed.flush()

    assert 'hx-swap-oob="innerHTML:#session-status"' in html
    assert 'hx-swap-oob="innerHTML:#usage"' in html
    assert paths.count(f"/sessions/{session_id}") == 1
