"""A runner of its own in a test, as another process would have, and what to look at
while it runs: the turns it is given, their jobs and their sessions' logs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.db.engine import Database
from app.db.repositories.items import ItemRepository
from app.db.repositories.jobs import JobRepository
from app.services.chat import IfBusy, send_message
from app.services.sessions import create_session
from app.settings import Settings
from app.wiring import Runtime
from app.worker.runner import Runner
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.settings import MakeSettings


def agent_settings(
    make_settings: MakeSettings, fake: FakeMessagesAPI, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "anthropic_base_url": fake.url,
        "llm_max_retries": 0,
        "llm_timeout_seconds": 30.0,
        "worker_poll_seconds": 0.02,
        "job_heartbeat_seconds": 0.1,
        "db_retry_max_seconds": 0.5,
    }
    return make_settings(**{**values, **overrides})


@asynccontextmanager
async def running(parts: Runtime, settings: Settings, worker_id: str) -> AsyncIterator[Runner]:
    """A runner of its own over `parts`, as another process would have."""
    runner = Runner(
        settings, parts.database, parts.llm, parts.tools, parts.hub, parts.pieces,
        worker_id=worker_id,
    )  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        yield runner
    finally:
        stop.set()
        await task


async def enqueue_turn(database: Database, text: str) -> str:
    async def work(db: Any) -> str:
        session = await create_session(db, "acme")
        return (await send_message(db, "acme", session.id, text, IfBusy.enqueue)).id

    return await database.write(work)


async def job_of(database: Database, job_id: str) -> Any:
    async with database.read() as db:
        return await JobRepository(db).get(job_id)


async def has_status(database: Database, job_id: str, statuses: frozenset[str]) -> bool:
    job = await job_of(database, job_id)
    return job is not None and job.status in statuses


async def log_of(database: Database, session_id: str) -> list[dict[str, Any]]:
    async with database.read() as db:
        rows = await ItemRepository(db).list_page(session_id, after_seq=0, limit=1000)
    return [{"seq": r.seq, "kind": r.kind, **r.payload} for r in rows]
