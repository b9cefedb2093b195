"""A runner ends its job through a copy of its own (`held_job`): the status change is
one prepared statement of the columns a status change sets, and a transaction that
rolls back leaves the runner's job, and so its lease token, as it was."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.jobs import JobStatus
from app.domain.usage import Usage
from app.services.jobs import set_status
from app.services.leases import fence, held_job
from tests.support.databases import database_with


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, "s1") as db:

        async def queue(session: AsyncSession) -> None:
            session.add(Job(id="job_1", tenant="t", session_id="s1", status=JobStatus.queued))

        await db.write(queue)
        yield db


async def _claimed(database: Database) -> Job:
    until = utcnow() + timedelta(seconds=30)
    (job,) = await database.write_statements(
        lambda db: JobRepository(db).claim("worker-a", until, limit=1)
    )
    return job


def _ending(job: Job, *, fail: bool = False) -> Callable[[AsyncSession], Awaitable[None]]:
    async def end(db: AsyncSession) -> None:
        await fence(db, job)
        current = await held_job(db, job)
        await set_status(db, current, JobStatus.succeeded, result={"text": "done"})
        if fail:
            raise RuntimeError("the commit did not happen")

    return end


async def _stored(database: Database) -> Job:
    async with database.read() as db:
        job = await JobRepository(db).get("job_1")
    assert job is not None
    return job


async def test_an_end_that_rolled_back_leaves_the_runners_job_and_its_retry_ends_it(
    database: Database,
) -> None:
    job = await _claimed(database)

    with pytest.raises(RuntimeError):
        await database.write(_ending(job, fail=True))

    assert (job.status, job.lease_owner) == ("running", "worker-a#1")
    await database.write(_ending(job))
    stored = await _stored(database)
    assert (stored.status, stored.result, stored.lease_owner) == (
        "succeeded",
        {"text": "done"},
        None,
    )


async def test_an_end_keeps_what_statements_of_their_own_wrote_meanwhile(
    database: Database,
) -> None:
    job = await _claimed(database)
    usage = Usage(input_tokens=120, output_tokens=30)
    await database.write_statements(lambda db: JobRepository(db).add_usage("job_1", usage))

    await database.write(_ending(job))

    stored = await _stored(database)
    assert (stored.status, stored.input_tokens, stored.output_tokens) == ("succeeded", 120, 30)
