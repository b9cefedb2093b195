"""Fenced writes: a running job writes only while it still owns its lease.

A job is claimed with a lease token (`jobs.lease_owner`, new at every claim). If a
runner's heartbeat comes late and the lease expires, another runner may claim the
job and resume it; the first runner must then not write one more row, or the log
would get its steps twice (two `tool_result`s for one `tool_use`). So every write
transaction of a job starts by checking the token in one statement — an UPDATE of
the job's row, which on PostgreSQL also locks it against a concurrent claim — and
is rolled back whole, raising `LeaseLost`, when the token is no longer there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import inspect
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job
from app.db.prepared import Prepared
from app.db.repositories.jobs import JobRepository
from app.db.rows import clone
from app.db.writer import Work

T = TypeVar("T")


class LeaseLost(Exception):
    """Another runner owns the job now; this one must stop and touch nothing."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id}: the lease was taken over by another runner")
        self.job_id = job_id


async def fence(db: AsyncSession, job: Job) -> None:
    """The first statement of each of `job`'s write transactions."""
    if job.lease_owner is None or not await JobRepository(db).still_owned(job.id, job.lease_owner):
        raise LeaseLost(job.id)


async def held_job(db: AsyncSession, job: Job) -> Job:
    """`job` as a fenced transaction of its runner may change it.

    A chat job's copy is as the runner's last write left it: a copy of it is used, not
    the row read again (after the fence nobody else writes the job's own columns; a
    cancel request and the usage counters have statements of their own). Left out of
    `db`, a status change writes only its own columns, by one prepared statement
    (`JobRepository.save_status`), without the ORM's flush; and being a copy, a rollback
    leaves the runner's as it was (its lease token still fences the retry). A copy
    changed in memory since (a piece job's runner keeps its movement there) is read again
    instead: its changes are not the database's."""
    if not inspect(job).modified:
        return clone(job)
    current = await JobRepository(db).get(job.id)
    if current is None:
        raise LeaseLost(job.id)
    return current


class JobDatabase:
    """The database as a running job sees it: reads as usual, every write fenced."""

    def __init__(self, database: Database, job: Job) -> None:
        self.database = database
        self.job = job

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self.database.read() as db:
            yield db

    async def read_unit(self, work: Work[T]) -> T:
        return await self.database.read_unit(work)

    async def peek(self, statement: Prepared, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return await self.database.peek(statement, params)

    async def read_statements(self, work: Work[T]) -> T:
        return await self.database.read_statements(work)

    async def write(self, work: Work[T]) -> T:
        return await self.database.write(self._fenced(work))

    async def write_statements(self, work: Work[T]) -> T:
        return await self.database.write_statements(self._fenced(work))

    def _fenced(self, work: Work[T]) -> Work[T]:
        job = self.job

        async def fenced(db: AsyncSession) -> T:
            await fence(db, job)  # a prepared statement
            return await work(db)

        return fenced
