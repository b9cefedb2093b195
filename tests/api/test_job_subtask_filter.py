"""GET /jobs?parent_job_id= lists a job's subtasks, newest first, and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel.ext.asyncio.session import AsyncSession

from app.services.jobs import get_job
from app.services.piece_jobs import submit_job as submit_piece_job
from tests.support.apps import serve
from tests.support.chat import submit_job


@pytest.fixture
async def parked(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """No runner: jobs stay queued."""
    async with serve(make_settings(run_worker_in_server=False)) as pair:
        yield pair


async def _child_of(app: FastAPI, parent_id: str, instruction: str) -> str:
    async def work(db: AsyncSession) -> str:
        parent = await get_job(db, "local", parent_id)
        piece = app.state.runtime.pieces.get("default")
        child = await submit_piece_job(
            db, "local", instruction=instruction, piece=piece, parent=parent
        )
        return child.id

    job_id: str = await app.state.database.write(work)
    return job_id


async def test_parent_job_id_lists_only_that_jobs_subtasks(
    parked: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = parked
    parent = (await submit_job(client))["id"]
    other = (await submit_job(client))["id"]
    first = await _child_of(app, parent, "one")
    second = await _child_of(app, parent, "two")
    await _child_of(app, other, "elsewhere")

    listed = (await client.get("/jobs", params={"parent_job_id": parent})).json()

    assert [j["id"] for j in listed["data"]] == [second, first]
    assert {j["parent_job_id"] for j in listed["data"]} == {parent}


async def test_a_job_without_subtasks_lists_none(client: httpx.AsyncClient) -> None:
    job = await submit_job(client, start=False)

    listed = (await client.get("/jobs", params={"parent_job_id": job["id"]})).json()

    assert listed == {"data": [], "next_cursor": None}
