"""DELETE /sessions/{id}: 204, then 404; its jobs stop; its log, tasks, memory, events,
comments and files are gone; the sessions that continued from it stay."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from app.services.piece_jobs import workspace_of
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.chat import new_session, submit_job

TABLES = {
    "items": "session_id",
    "events": "session_id",
    "jobs": "session_id",
    "memory_turns": "session_id",
}


async def _rows_of(app: FastAPI, session_id: str) -> dict[str, int]:
    counts = {}
    async with app.state.database.read() as db:
        for table, column in TABLES.items():
            result = await db.exec(
                text(f"SELECT count(*) FROM {table} WHERE {column} = :s"), params={"s": session_id}
            )
            counts[table] = result.scalar_one()
        result = await db.exec(
            text("SELECT count(*) FROM job_comments c JOIN jobs j ON j.id = c.job_id "
                 "WHERE j.session_id = :s"),
            params={"s": session_id},
        )  # fmt: skip
        counts["job_comments"] = result.scalar_one()
    return counts


async def test_deleting_a_session_removes_everything_in_it(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply("hello")
    session_id = await new_session(agent_client)
    turn = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )
    assert turn.status_code == 200, turn.text
    await agent_client.post(f"/sessions/{session_id}/tasks", json={"subject": "a task"})
    fake_llm.hang(30)  # the piece job below waits for its first answer until deleted
    job = await submit_job(agent_client, session_id=session_id, piece="default")
    await agent_client.post(f"/jobs/{job['id']}/comments", json={"body": "a comment"})
    upload = await agent_client.put(f"/jobs/{job['id']}/files/input/notes.txt", content=b"x")
    assert upload.status_code in (200, 201), upload.text
    folder = workspace_of(agent_app.state.settings, job["id"]).root
    assert await asyncio.to_thread(os.path.isdir, folder)
    await fake_llm.wait_for_requests(2)  # the piece job is running
    before = await _rows_of(agent_app, session_id)
    assert all(before[t] for t in ("items", "events", "jobs", "job_comments")), before

    deleted = await agent_client.delete(f"/sessions/{session_id}")

    assert deleted.status_code == 204
    assert deleted.content == b""
    assert (await agent_client.get(f"/sessions/{session_id}")).status_code == 404
    assert (await agent_client.get(f"/sessions/{session_id}/items")).status_code == 404
    assert (await agent_client.get(f"/sessions/{session_id}/tasks")).status_code == 404
    assert (await agent_client.get(f"/jobs/{job['id']}")).status_code == 404
    assert await _rows_of(agent_app, session_id) == dict.fromkeys(before, 0)
    assert not await asyncio.to_thread(os.path.exists, folder)
    assert (await agent_client.delete(f"/sessions/{session_id}")).status_code == 404


async def test_deleting_a_session_stops_its_running_turn(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply("too late", delay=5.0)
    fake_llm.reply("the other session still works")
    session_id = await new_session(agent_client)
    sent = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})
    assert sent.status_code == 202
    await fake_llm.wait_for_requests(1)  # the turn is waiting for its answer
    assert (await agent_client.delete(f"/sessions/{session_id}")).status_code == 204

    other = await new_session(agent_client)
    reply = await agent_client.post(
        f"/sessions/{other}/messages", params={"wait": "true"}, json={"text": "again"}
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["text"] == "the other session still works"


async def test_a_continuation_outlives_the_session_it_continued(
    client: httpx.AsyncClient,
) -> None:
    first = await new_session(client)
    second = await new_session(client, continues_from=first)

    assert (await client.delete(f"/sessions/{first}")).status_code == 204

    kept = await client.get(f"/sessions/{second}")
    assert kept.status_code == 200
    assert kept.json()["continues_from"] is None


async def test_another_tenants_session_cannot_be_deleted(make_settings: Any) -> None:
    from tests.support.apps import serve

    async with serve(make_settings(api_keys="a:key-a,b:key-b")) as (_, c):
        created = await c.post("/sessions", json={}, headers={"Authorization": "Bearer key-a"})
        session_id = created.json()["id"]
        other = await c.delete(f"/sessions/{session_id}", headers={"Authorization": "Bearer key-b"})
        still = await c.get(f"/sessions/{session_id}", headers={"Authorization": "Bearer key-a"})

    assert other.status_code == 404
    assert still.status_code == 200
