"""SQLite has one writer at a time: the writers of one process queue in the process.

Without that queue each writer would wait in SQLite's busy handler, which sleeps
between retries and gives up after the busy timeout with "database is locked".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select

from app.db.engine import Database
from app.db.models import Session


@pytest.mark.sqlite_only
async def test_concurrent_writers_of_one_process_never_meet_the_busy_timeout(
    make_settings: Any,
) -> None:
    database = Database(make_settings(sqlite_busy_timeout_ms=1))

    async def write(n: int) -> None:
        async with database.session(write=True) as db:
            db.add(Session(id=f"ses_{n}", tenant="acme"))
            await db.flush()
            await asyncio.sleep(0.01)  # hold the write lock while the others try

    try:
        await asyncio.gather(*(write(n) for n in range(20)))
        async with database.session(write=False) as db:
            count = (await db.exec(select(func.count()).select_from(Session))).one()
    finally:
        await database.dispose()

    assert count == 20
