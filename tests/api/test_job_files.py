"""`POST /jobs` with `files`: stored files copied into the job's `input/` before it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.services.auth import LOCAL_TENANT
from app.services.files import upload
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import serve
from tests.support.chat import submit_job, wait_status


@pytest.fixture
async def quiet(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app without a runner (submitted jobs stay queued), two files a job may take."""
    async with serve(
        make_settings(run_worker_in_server=False, job_files_max_count=3, job_files_max_bytes=64)
    ) as parts:
        yield parts


@pytest.fixture
async def api(quiet: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return quiet[1]


async def _file(client: httpx.AsyncClient, data: bytes, name: str = "notes.txt") -> str:
    response = await client.post(
        "/files", params={"filename": name}, content=data, headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _create(client: httpx.AsyncClient, files: list[dict[str, str]]) -> httpx.Response:
    return await client.post("/jobs", json={"instruction": "Do the thing.", "files": files})


async def test_a_jobs_files_are_in_its_input_folder_once_it_is_created(
    api: httpx.AsyncClient,
) -> None:
    notes = await _file(api, b"Use column b.\n")
    data = await _file(api, b"a,b\n1,2\n", "data.csv")

    job = await submit_job(
        api,
        files=[{"file_id": notes, "path": "notes.txt"}, {"file_id": data, "path": "in/data.csv"}],
    )

    listed = (await api.get(f"/jobs/{job['id']}/files")).json()
    assert sorted(listed["input"]) == ["in/data.csv", "notes.txt"]
    content = await api.get(f"/jobs/{job['id']}/files/input/in/data.csv")
    assert content.content == b"a,b\n1,2\n"


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../escape.txt", "a/../../b", "a//b", "nul\x00.txt", "subtasks/x.txt"],
)
async def test_a_bad_path_is_422_naming_the_entry(api: httpx.AsyncClient, path: str) -> None:
    notes = await _file(api, b"notes\n")

    response = await _create(
        api, [{"file_id": notes, "path": "ok.txt"}, {"file_id": notes, "path": path}]
    )

    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "files[1].path" in response.json()["detail"]
    assert (await api.get("/jobs")).json()["data"] == []


async def test_a_path_over_1000_characters_is_422(api: httpx.AsyncClient) -> None:
    notes = await _file(api, b"notes\n")

    response = await _create(api, [{"file_id": notes, "path": "a" * 1001}])

    assert response.status_code == 422, response.text


async def test_two_entries_with_one_path_are_422(api: httpx.AsyncClient) -> None:
    notes = await _file(api, b"notes\n")

    response = await _create(
        api, [{"file_id": notes, "path": "x.txt"}, {"file_id": notes, "path": "x.txt"}]
    )

    assert response.status_code == 422, response.text
    assert "files[1].path" in response.json()["detail"]


async def test_an_unknown_file_id_is_422_naming_the_entry(api: httpx.AsyncClient) -> None:
    response = await _create(api, [{"file_id": "fil_nope", "path": "x.txt"}])

    assert response.status_code == 422, response.text
    assert "files[0].file_id" in response.json()["detail"]
    assert (await api.get("/jobs")).json()["data"] == []


async def test_another_tenants_file_is_422_as_an_unknown_one(
    quiet: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = quiet
    runtime = app.state.runtime
    theirs = await upload(
        runtime.database,
        runtime.settings,
        f"{LOCAL_TENANT}-other",
        b"secret\n",
        declared="text/plain",
        filename="secret.txt",
    )

    response = await _create(client, [{"file_id": theirs.id, "path": "x.txt"}])

    assert response.status_code == 422, response.text
    assert "files[0].file_id" in response.json()["detail"]


async def test_more_files_than_the_count_bound_are_422(api: httpx.AsyncClient) -> None:
    notes = await _file(api, b"n\n")

    response = await _create(api, [{"file_id": notes, "path": f"{i}.txt"} for i in range(4)])

    assert response.status_code == 422, response.text
    assert "STRATA_JOB_FILES_MAX_COUNT" in response.json()["detail"]


async def test_files_over_the_bytes_bound_together_are_422(api: httpx.AsyncClient) -> None:
    big = await _file(api, b"x" * 40 + b"\n")

    response = await _create(
        api, [{"file_id": big, "path": "one.txt"}, {"file_id": big, "path": "two.txt"}]
    )

    assert response.status_code == 422, response.text
    assert "STRATA_JOB_FILES_MAX_BYTES" in response.json()["detail"]


async def test_the_jobs_agent_reads_a_file_it_was_given(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        llm_max_retries=0,
        worker_poll_seconds=0.05,
        job_heartbeat_seconds=0.1,
    )
    fake_llm.reply(tool_use("Read", {"path": "input/docs/plan.md"}))
    fake_llm.reply(tool_use("transition", {"next_step": "ABORT", "summary": "read it"}))

    async with serve(settings) as (_, client):
        plan = await _file(client, b"# Plan\nShip on Friday.\n", "plan.md")
        job = await submit_job(client, files=[{"file_id": plan, "path": "docs/plan.md"}])
        await wait_status(client, job["id"], {"aborted"})

    result = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert "Ship on Friday." in str(result["content"])
