"""A runner's heartbeat renews its leases without ever waiting for a row lock.

On PostgreSQL a job's fenced write holds its job's row for the whole transaction, and
the opening of a subtask's movement also takes its tree root's row. A heartbeat that
waited for a row while holding others could close a cycle with such a write (it holds
the root's row and wants the child's; the write holds the child's and wants the
root's): it passes a busy row over instead, which stays held while its token matches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, Session
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.jobs import JobStatus
from app.settings import Settings

LEASES = {"job_busy": "runner#1", "job_free": "runner#1", "job_lost": "runner#1"}


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[Database]:
    db = Database(settings)

    async def seed(session: AsyncSession) -> None:
        session.add(Session(id="ses_leases", tenant="acme"))
        await session.flush()
        soon = utcnow() + timedelta(seconds=5)
        for job_id, owner in [
            ("job_busy", "runner#1"),
            ("job_free", "runner#1"),
            ("job_lost", "other#2"),  # claimed again by another runner
        ]:
            session.add(
                Job(
                    id=job_id,
                    tenant="acme",
                    session_id="ses_leases",
                    status=JobStatus.running,
                    lease_owner=owner,
                    lease_expires_at=soon,
                    cancel_requested=job_id == "job_busy",
                )
            )

    await db.write(seed)
    yield db
    await db.dispose()


@pytest.mark.postgresql_only
async def test_a_heartbeat_passes_over_a_row_a_fenced_write_holds_and_keeps_its_lease(
    database: Database,
) -> None:
    holding, release = asyncio.Event(), asyncio.Event()

    async def fenced_write(db: AsyncSession) -> None:
        assert await JobRepository(db).still_owned("job_busy", "runner#1")  # locks the row
        holding.set()
        await release.wait()

    writer = asyncio.create_task(database.write(fenced_write))
    await holding.wait()
    until = utcnow() + timedelta(seconds=60)

    async def renew(db: AsyncSession) -> tuple[set[str], set[str]]:
        # a heartbeat that waits for the held row fails here instead of hanging the test
        await (await db.connection()).exec_driver_sql("SET LOCAL lock_timeout = '5s'")
        return await JobRepository(db).renew_leases(LEASES, until)

    try:
        held, cancel = await database.write(renew)
    finally:
        release.set()
        await writer

    assert held == {"job_busy", "job_free"}
    assert cancel == {"job_busy"}
    async with database.read() as db:
        free = await JobRepository(db).get("job_free")
    assert free is not None and free.lease_expires_at == until


async def test_a_heartbeat_renews_the_leases_it_holds_and_reports_cancels(
    database: Database,
) -> None:
    until = utcnow() + timedelta(seconds=60)

    async def renew(db: AsyncSession) -> tuple[set[str], set[str]]:
        return await JobRepository(db).renew_leases(LEASES, until)

    held, cancel = await database.write(renew)

    assert held == {"job_busy", "job_free"}
    assert cancel == {"job_busy"}
    async with database.read() as db:
        rows = [await JobRepository(db).get(job_id) for job_id in LEASES]
    assert [row.lease_expires_at == until for row in rows if row is not None] == [
        True,
        True,
        False,
    ]
