"""The runner under database faults: a lease taken over, a write lock held by another
process, a PostgreSQL restart. Afterwards every queued turn completes, none twice, and
the runner is still running.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.settings import Settings
from app.wiring import runtime
from app.worker.runner import Runner
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, tool_use
from tests.support.apps import serve
from tests.support.chat import TERMINAL, assert_log_consistent, items, new_session, wait_until
from tests.support.runners import (
    agent_settings,
    enqueue_turn,
    has_status,
    job_of,
    log_of,
    running,
)

pytestmark = pytest.mark.timeout(90)


# --- fenced leases ----------------------------------------------------------------------


async def test_a_runner_whose_lease_was_taken_over_writes_nothing(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Runner A's heartbeat never comes: its lease expires while it waits for the LLM,
    runner B takes the job over and finishes the turn; A's late answer is written nowhere."""
    late = agent_settings(  # A runs one job at a time: the expired job is B's to take
        make_settings,
        fake_llm,
        job_lease_seconds=0.3,
        job_heartbeat_seconds=3600.0,
        worker_concurrency=1,
    )
    prompt = agent_settings(make_settings, fake_llm, job_lease_seconds=30.0)
    fake_llm.reply(tool_use("TaskList", {}, id="toolu_late"), delay=1.5)  # A, answered late
    fake_llm.reply(tool_use("TaskList", {}, id="toolu_b"))  # B
    fake_llm.reply("Done.")  # B

    async with (
        runtime(late, with_runner=False) as a_parts,
        runtime(prompt, with_runner=False) as b_parts,
    ):
        job_id = await enqueue_turn(a_parts.database, "List my tasks.")
        async with running(a_parts, late, "runner-a") as runner_a:
            await fake_llm.wait_for_requests(1)
            async with running(b_parts, prompt, "runner-b"):
                await wait_until(lambda: has_status(b_parts.database, job_id, TERMINAL), seconds=20)
                await wait_until(lambda: _idle(runner_a), seconds=20)  # A got its answer
        job = await job_of(b_parts.database, job_id)
        log = await log_of(b_parts.database, job.session_id)

    assert (job.status, job.attempts) == ("succeeded", 2)
    assert [i["kind"] for i in log] == [
        "user_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
    ]
    assert [i["tool_use_id"] for i in log if i["kind"] == "tool_result"] == ["toolu_b"]
    assert "toolu_late" not in str(log)
    assert len(fake_llm.requests) == 3


async def _idle(runner: Runner) -> bool:
    return not runner._running


# --- database outages under running turns ------------------------------------------------


def answer_every_turn(body: dict[str, Any]) -> Step:
    """One tool call, then the answer; slow enough that turns are mid-way at the fault."""
    last = body["messages"][-1]
    if isinstance(last["content"], list) and last["content"][0].get("type") == "tool_result":
        return reply("Done.", delay=0.3)
    return reply(tool_use("TaskList", {}), delay=0.3)


async def start_turns(client: httpx.AsyncClient, sessions: int, turns: int) -> list[str]:
    jobs = []
    for _ in range(sessions):
        session_id = await new_session(client)
        for turn in range(turns):
            sent = await client.post(
                f"/sessions/{session_id}/messages", json={"text": f"message {turn}"}
            )
            assert sent.status_code == 202, sent.text
            jobs.append(sent.json()["job_id"])
    return jobs


async def assert_every_turn_completed_once(client: httpx.AsyncClient, jobs: list[str]) -> None:
    async def ended() -> bool:
        statuses = [(await client.get(f"/jobs/{j}")).json()["status"] for j in jobs]
        return all(s in TERMINAL for s in statuses)

    await wait_until(ended, seconds=60)
    sessions = set()
    for job_id in jobs:
        job = (await client.get(f"/jobs/{job_id}")).json()
        assert job["status"] == "succeeded", job
        sessions.add(job["session_id"])
    for session_id in sessions:
        log = await items(client, session_id)
        assert_log_consistent(log)
        answers = [
            i for i in log if i["kind"] == "assistant_message" and i["stop_reason"] == "end_turn"
        ]
        users = [i for i in log if i["kind"] == "user_message"]
        assert len(answers) == len(users) == 2


def hold_write_lock(database_url: str, seconds: float) -> subprocess.Popen[str]:
    """Another process takes SQLite's write lock and keeps it for `seconds`."""
    path = make_url(database_url).database
    script = textwrap.dedent(
        f"""
        import sqlite3, sys, time
        db = sqlite3.connect({path!r}, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        print("locked", flush=True)
        time.sleep({seconds})
        db.execute("COMMIT")
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


async def turns_complete_once_across(
    make_settings: Any, fake: FakeMessagesAPI, fault: Callable[[Settings], None]
) -> None:
    """Eight turns in four sessions, `fault` (blocking) once two requests are out, then
    every turn ends succeeded, none twice, and the process is still ready."""
    settings = agent_settings(make_settings, fake, job_lease_seconds=5.0)
    fake.always(answer_every_turn)
    async with serve(settings) as (_app, client):
        jobs = await start_turns(client, sessions=4, turns=2)
        await fake.wait_for_requests(2)
        await asyncio.to_thread(fault, settings)
        await assert_every_turn_completed_once(client, jobs)
        ready = await client.get("/readyz")

    assert ready.status_code == 200, ready.text


@pytest.mark.sqlite_only
async def test_turns_complete_once_after_another_process_held_the_write_lock_12s(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    def lock_for_12s(settings: Settings) -> None:
        hold_write_lock(settings.database_url, 12.0).communicate()

    await turns_complete_once_across(make_settings, fake_llm, lock_for_12s)


@pytest.mark.postgresql_only
async def test_turns_complete_once_after_a_postgresql_restart(
    make_settings: Any, fake_llm: FakeMessagesAPI, database_factory: Any
) -> None:
    def restart(_settings: Settings) -> None:
        database_factory.restart_server(3.0)

    await turns_complete_once_across(make_settings, fake_llm, restart)


@pytest.mark.sqlite_only
async def test_a_request_that_meets_a_locked_database_gets_503_with_retry_after(
    make_settings: Any,
) -> None:
    settings = make_settings(sqlite_busy_timeout_ms=100, db_unavailable_retry_after_seconds=3)
    async with serve(settings) as (_app, client):
        holder = await asyncio.to_thread(hold_write_lock, settings.database_url, 2.0)
        try:
            refused = await client.post("/sessions", json={})
        finally:
            await asyncio.to_thread(holder.communicate)
        created = await client.post("/sessions", json={})

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "3"
    assert refused.json()["type"] == "urn:strata:problem:database-unavailable"
    assert created.status_code == 201
