"""What the Schemathesis run (tests/fuzz) found, each pinned by a test of its own."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from app.db.models import Job
from app.settings import Settings
from app.worker.runner import Runner
from tests.api.test_errors import assert_problem
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.apps import serve

UNKNOWN_ID = "0" * 40


async def _job_id(client: httpx.AsyncClient) -> str:
    response = await client.post("/jobs", json={"instruction": "Summarise the data."})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


# An unknown id on an SSE stream is looked up before the 200 is sent: inside the stream's
# generator, the client would get a broken stream, not a 404.
async def test_events_of_an_unknown_session_are_a_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get(f"/sessions/{UNKNOWN_ID}/events")

    assert assert_problem(response, 404)["resource"] == "session"


async def test_events_of_an_unknown_job_are_a_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get(f"/jobs/{UNKNOWN_ID}/events")

    assert assert_problem(response, 404)["resource"] == "job"


# A JSON body that could not even be decoded got FastAPI's undeclared 400; malformed
# JSON is a 422 `json_invalid` everywhere else.
@pytest.mark.parametrize(
    "body",
    [b'{"title": "\xff\xfe"}', b"[" * 100_000],
    ids=["not-utf-8", "nested-too-deep"],
)
async def test_an_undecodable_json_body_is_a_422_problem(
    client: httpx.AsyncClient, body: bytes
) -> None:
    response = await client.post(
        "/sessions", content=body, headers={"content-type": "application/json"}
    )

    problem = assert_problem(response, 422)
    assert problem["errors"][0]["type"] == "json_invalid"


# A 405 named only the methods of the first route matching the path, so `Allow` left
# out PATCH on /sessions/{id} (one route per method).
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("OPTIONS", f"/sessions/{UNKNOWN_ID}", "GET, PATCH, DELETE"),
        ("DELETE", "/sessions", "GET, POST"),
        ("OPTIONS", f"/sessions/{UNKNOWN_ID}/tasks/1", "GET, PATCH"),
    ],
)
async def test_405_allow_names_every_method_of_the_path(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)

    assert_problem(response, 405)
    assert response.headers["allow"] == allow


# A path the filesystem refuses (a name over NAME_MAX, a file where a folder should
# be) escaped as an OSError: a 500.
async def test_an_input_file_name_too_long_is_a_422_problem(client: httpx.AsyncClient) -> None:
    job_id = await _job_id(client)

    response = await client.put(f"/jobs/{job_id}/files/input/{'a' * 300}", content=b"x")

    assert assert_problem(response, 422)["field"] == "path"


async def test_downloading_a_file_name_too_long_is_a_404_problem(
    client: httpx.AsyncClient,
) -> None:
    job_id = await _job_id(client)

    response = await client.get(f"/jobs/{job_id}/files/input/{'a' * 300}")

    assert_problem(response, 404)


async def test_an_input_file_under_a_file_is_a_422_problem(client: httpx.AsyncClient) -> None:
    job_id = await _job_id(client)
    first = await client.put(f"/jobs/{job_id}/files/input/notes", content=b"x")
    assert first.status_code == 201, first.text

    response = await client.put(f"/jobs/{job_id}/files/input/notes/more.txt", content=b"y")

    assert assert_problem(response, 422)["field"] == "path"


# At shutdown the runner cancels running jobs and hands each back to the queue; when
# that write fails (SQLite still locked by the step the cancel cut short), the error
# stays in the runner, and the app's shutdown goes on.
async def test_shutdown_survives_a_job_it_cannot_hand_back(
    agent_settings: Settings,
    fake_llm: FakeMessagesAPI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def locked(self: Runner, job: Job) -> Any:
        raise OperationalError("UPDATE jobs", {}, sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(Runner, "_hand_back", locked)
    fake_llm.hang(30)
    async with serve(agent_settings) as (_, c):
        session = await c.post("/sessions", json={})
        sent = await c.post(f"/sessions/{session.json()['id']}/messages", json={"text": "hi"})
        assert sent.status_code == 202, sent.text
        await fake_llm.wait_for_requests(1)

    assert f"job {sent.json()['job_id']} could not be settled; its lease will expire" in caplog.text
