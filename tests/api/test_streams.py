"""Event streams end, resume anywhere, validate their position and say what each event is."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.schemas.events import StreamEventData
from app.db.repositories.jobs import JobRepository
from app.domain.jobs import JobStatus
from app.services.jobs import set_status
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job


def _events(body: str) -> list[dict[str, Any]]:
    """The events of a whole SSE body: {id, event, data} each (comments left out)."""
    events = []
    for frame in body.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in frame.splitlines():
            name, _, value = line.partition(": ")
            if name in {"id", "event"}:
                fields[name] = value
            elif name == "data":
                fields["data"] = json.loads(value)
        if fields:
            events.append(fields)
    return events


@asynccontextmanager
async def _idle_app(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """No runner: jobs stay where the test puts them."""
    async with serve(make_settings(run_worker_in_server=False)) as (app, client):
        yield app, client


async def _end_job(app: FastAPI, job_id: str, status: str) -> None:
    async def end(db: AsyncSession) -> None:
        job = await JobRepository(db).get(job_id)
        assert job is not None
        await set_status(db, job, JobStatus(status))

    await app.state.database.write(end)


@pytest.mark.parametrize("status", ["succeeded", "failed", "aborted", "cancelled"])
async def test_the_stream_of_an_ended_job_ends_whatever_its_end(
    make_settings: Any, status: str
) -> None:
    async with _idle_app(make_settings) as (app, client):
        job = await submit_job(client)
        await _end_job(app, job["id"], status)

        response = await asyncio.wait_for(client.get(f"/jobs/{job['id']}/events"), 10)

    events = _events(response.text)
    assert response.status_code == 200
    assert events[-1]["event"] == "job.status"
    assert events[-1]["data"]["status"] == status


@pytest.mark.parametrize("position", ["last", "past"])
async def test_resuming_at_or_past_the_end_of_an_ended_job_answers_204(
    make_settings: Any, position: str
) -> None:
    async with _idle_app(make_settings) as (app, client):
        job = await submit_job(client)
        await _end_job(app, job["id"], "aborted")
        everything = _events((await client.get(f"/jobs/{job['id']}/events")).text)
        last_id = everything[-1]["id"] if position == "last" else "999999999999999999"

        response = await asyncio.wait_for(
            client.get(f"/jobs/{job['id']}/events", headers={"Last-Event-ID": last_id}), 10
        )

    # nothing to send and nothing to come: 204, which stops a browser's EventSource (an
    # empty 200 would make it reconnect every few seconds forever)
    assert response.status_code == 204, response.text
    assert response.text == ""


@pytest.mark.parametrize(
    "value",
    ["99999999999999999999999", "9223372036854775808", "\u00b2", "-1", "1.0", "abc", "1e3"],
)
async def test_a_malformed_last_event_id_is_a_422_before_the_stream_starts(
    client: httpx.AsyncClient, value: str
) -> None:
    session_id = await new_session(client)

    response = await client.get(
        f"/sessions/{session_id}/events",
        headers={"Last-Event-ID": value.encode()},  # type: ignore[arg-type]  # raw bytes on purpose
    )

    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert "Last-Event-ID" in response.json()["detail"]


async def test_every_event_says_its_type_and_the_ids_it_concerns(make_settings: Any) -> None:
    async with _idle_app(make_settings) as (app, client):
        job = await submit_job(client)
        await client.post(f"/jobs/{job['id']}/comments", json={"body": "note"})
        await client.post(f"/sessions/{job['session_id']}/tasks", json={"subject": "a task"})
        await _end_job(app, job["id"], "cancelled")

        job_events = _events((await client.get(f"/jobs/{job['id']}/events")).text)

    assert {e["event"] for e in job_events} >= {"job.status", "job.comment"}
    for event in job_events:
        assert event["data"]["type"] == event["event"]
        assert event["data"]["session_id"] == job["session_id"]
        assert event["data"]["job_id"] == job["id"]


async def test_every_event_is_what_the_document_says_it_is(make_settings: Any) -> None:
    async with _idle_app(make_settings) as (app, client):
        job = await submit_job(client)
        await client.post(f"/jobs/{job['id']}/comments", json={"body": "note"})
        await client.post(f"/sessions/{job['session_id']}/tasks", json={"subject": "a task"})
        await _end_job(app, job["id"], "cancelled")

        job_events = _events((await client.get(f"/jobs/{job['id']}/events")).text)

    documented = TypeAdapter(StreamEventData)
    for event in job_events:  # the model forbids nothing, so compare what it read back
        parsed = documented.validate_python(event["data"])
        assert parsed.model_dump(mode="json") == event["data"]
    statuses = [e["data"] for e in job_events if e["event"] == "job.status"]
    assert {(s["kind"], s["piece"]) for s in statuses} == {("piece", "default")}


async def test_a_task_change_streams_what_its_webhook_carries(make_settings: Any) -> None:
    settings = make_settings(run_worker_in_server=False, webhook_allow_private=True)
    async with serve(settings) as (app, client):
        hook = await client.post(
            "/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["task.updated"]}
        )
        session_id = await new_session(client)
        await client.post(f"/sessions/{session_id}/tasks", json={"subject": "a task"})
        session_stream = await _session_events_until(app, session_id, "task.updated")
        deliveries = await client.get(f"/webhooks/{hook.json()['id']}/deliveries")

    (task_event,) = [e for e in session_stream if e["event"] == "task.updated"]
    (delivery,) = deliveries.json()["data"]
    assert task_event["data"] == {"type": "task.updated", **delivery["payload"]["data"]}
    assert task_event["data"]["subject"] == "a task"
    assert task_event["data"]["status"] == "pending"


async def _read_stream(
    app: FastAPI, path: str, until: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> str:
    """Call the app as a server would and hang up once `until(body so far)` holds: a session
    stream never ends by itself (and httpx's ASGI transport waits for the end)."""
    body = ""
    hung_up = asyncio.Event()

    async def receive() -> MutableMapping[str, Any]:
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal body
        if message["type"] == "http.response.body":
            body += message.get("body", b"").decode()
            if until(body):
                hung_up.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"strata.test"), *(headers or [])],
        "client": ("127.0.0.1", 1),
        "server": ("strata.test", 80),
    }
    await asyncio.wait_for(app(scope, receive, send), 10)
    return body


async def _session_events_until(
    app: FastAPI, session_id: str, event_type: str
) -> list[dict[str, Any]]:
    body = await _read_stream(
        app, f"/sessions/{session_id}/events", lambda text: f"event: {event_type}" in text
    )
    return _events(body)


async def test_a_quiet_stream_sends_one_keep_alive_of_its_own_per_interval(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's own SSE pings (every 15 s, made 0.01 s here) would double ours."""
    monkeypatch.setattr("fastapi.routing._PING_INTERVAL", 0.01)
    settings = make_settings(sse_keepalive_seconds=0.05, worker_poll_seconds=0.01)
    async with serve(settings) as (app, client):
        session_id = await new_session(client)

        body = await _read_stream(
            app, f"/sessions/{session_id}/events", lambda text: text.count(":") >= 4
        )

    frames = [frame for frame in body.split("\n\n") if frame]
    assert len(frames) >= 4
    assert set(frames) == {": keep-alive"}


@pytest.mark.postgresql_only
async def test_an_idle_stream_on_postgresql_waits_for_notifications_instead_of_polling(
    make_settings: Any,
) -> None:
    """Polling every 0.01 s would read the table dozens of times before the third
    keep-alive (every 0.2 s); notified, the stream reads it once per keep-alive."""
    settings = make_settings(
        sse_keepalive_seconds=0.2, worker_poll_seconds=0.01, run_worker_in_server=False
    )
    async with serve(settings) as (app, client):
        session_id = await new_session(client)
        stats = app.state.database.stats
        before = stats.snapshot()

        await _read_stream(
            app, f"/sessions/{session_id}/events", lambda text: text.count("keep-alive") >= 3
        )
        reads = stats.since(before).statements

    assert reads <= 12  # the session look-up, then one read per keep-alive at most
