"""Helpers for tests that run real agent turns against the fake Messages API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import httpx

from tests.fakes.messages_api import Reply

TERMINAL = frozenset({"succeeded", "failed", "aborted", "cancelled"})


def held(gate: threading.Event, step: Reply) -> Reply:
    """`step` as the fake serves it only once `gate` is set (`reply(held=…)`: it waits
    without blocking the fake's server)."""
    return replace(step, held=gate)


async def new_session(client: httpx.AsyncClient, **fields: Any) -> str:
    response = await client.post("/sessions", json=fields)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def submit_job(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    """POST /jobs with a default instruction; `fields` add to or replace it."""
    response = await client.post("/jobs", json={"instruction": "Do the thing.", **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def wait_status(
    client: httpx.AsyncClient, job_id: str, statuses: Iterable[str], *, seconds: float = 20.0
) -> dict[str, Any]:
    """Poll until the job reaches one of `statuses`: observable state, never a fixed sleep."""
    wanted = set(statuses)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        job = dict((await client.get(f"/jobs/{job_id}")).json())
        if job["status"] in wanted:
            return job
        assert loop.time() < deadline, f"job {job_id} is {job['status']}, not in {wanted}: {job}"
        await asyncio.sleep(0.02)


async def wait_job(
    client: httpx.AsyncClient, job_id: str, *, seconds: float = 20.0
) -> dict[str, Any]:
    """Poll until the job ends."""
    return await wait_status(client, job_id, TERMINAL, seconds=seconds)


async def wait_until(predicate: Any, *, seconds: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await predicate():
        assert loop.time() < deadline, "condition never became true"
        await asyncio.sleep(0.02)


async def items(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/sessions/{session_id}/items", params={"limit": 200})
    return list(response.json()["data"])


def assert_log_consistent(log: list[dict[str, Any]]) -> None:
    """Every tool_use has exactly one tool_result, and seqs are 1..n."""
    assert [i["seq"] for i in log] == list(range(1, len(log) + 1))
    uses = [
        b["id"]
        for i in log
        if i["kind"] == "assistant_message"
        for b in i["content"]
        if b["type"] == "tool_use"
    ]
    results = [i["tool_use_id"] for i in log if i["kind"] == "tool_result"]
    assert sorted(uses) == sorted(results)
