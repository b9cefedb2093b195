"""Claiming jobs from several workers at once: a job is never claimed twice.

PostgreSQL locks the claimed row `FOR UPDATE SKIP LOCKED`, so a second claimer
passes over it without waiting; SQLite's writing transactions are exclusive, so
the second claimer waits and then sees the job taken.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import timedelta
from typing import Any, cast

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, Session
from app.db.repositories.jobs import _CLAIM, CLAIMABLE, JobRepository
from app.db.types import utcnow
from app.domain.jobs import JobStatus
from app.settings import Settings
from app.worker.runner import Runner

HOLD_SECONDS = 0.5
"""How long worker A keeps its claim open when B is expected to wait for it."""
PATIENCE_SECONDS = 15.0
"""How long A keeps it open when B is expected to finish first: B's claim ends
A's hold as soon as it returns, so this only bounds a loaded machine's delay."""


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[Database]:
    db = Database(settings)
    yield db
    await db.dispose()


async def _seed(database: Database, *sessions: str) -> None:
    """One queued job in each of `sessions`, in that order."""

    async def seed(db: AsyncSession) -> None:
        for session_id in sessions:
            db.add(Session(id=session_id, tenant="acme"))
        await db.flush()
        for session_id in sessions:
            db.add(
                Job(
                    id=f"job_{session_id}",
                    tenant="acme",
                    session_id=session_id,
                    status=JobStatus.queued,
                )
            )

    await database.write(seed)


async def _claim(
    database: Database,
    owner: str,
    *,
    claimed: threading.Event | None = None,
    release: threading.Event | None = None,
) -> str | None:
    """One claim as the runner makes it; with `release`, the transaction (and its
    locks) stays open until that is set, `claimed` being set once the job is taken.
    (Thread events: on SQLite the claim runs on the writer thread.)"""

    async def claim(db: AsyncSession) -> str | None:
        jobs = await JobRepository(db).claim(owner, utcnow() + timedelta(seconds=30), limit=1)
        job = jobs[0] if jobs else None
        if claimed is not None:
            claimed.set()
        if release is not None:
            await asyncio.to_thread(release.wait)
        return None if job is None else job.id

    return await database.write(claim)


async def _first_holds_while_second_claims(
    database: Database, hold: float = HOLD_SECONDS
) -> tuple[str | None, str | None, bool]:
    """Worker A claims and keeps its transaction open; worker B claims meanwhile.
    Returns both claims and whether B finished while A still held its transaction."""
    claimed, release = threading.Event(), threading.Event()
    first = asyncio.create_task(_claim(database, "worker-a", claimed=claimed, release=release))
    assert await asyncio.to_thread(claimed.wait, 5)
    second = asyncio.create_task(_claim(database, "worker-b"))
    done, _ = await asyncio.wait({second}, timeout=hold)
    release.set()
    return await first, await second, second in done


async def test_two_claimers_never_take_the_same_job(database: Database) -> None:
    await _seed(database, "ses_one", "ses_two")

    first, second, _ = await _first_holds_while_second_claims(database)

    assert first == "job_ses_one"
    assert second == "job_ses_two"


async def test_a_job_being_claimed_is_not_claimed_again(database: Database) -> None:
    await _seed(database, "ses_one")

    first, second, _ = await _first_holds_while_second_claims(database)

    assert first == "job_ses_one"
    assert second is None
    async with database.read() as db:
        job = await JobRepository(db).get("job_ses_one")
    assert job is not None
    assert (job.lease_owner, job.attempts) == ("worker-a#1", 1)


@pytest.mark.postgresql_only
async def test_postgresql_skips_a_locked_job_instead_of_waiting(database: Database) -> None:
    await _seed(database, "ses_one", "ses_two")

    first, second, without_waiting = await _first_holds_while_second_claims(
        database, hold=PATIENCE_SECONDS
    )

    assert (first, second) == ("job_ses_one", "job_ses_two")
    assert without_waiting


@pytest.mark.sqlite_only
async def test_sqlite_claims_one_writer_at_a_time(database: Database) -> None:
    await _seed(database, "ses_one", "ses_two")

    first, second, without_waiting = await _first_holds_while_second_claims(database)

    assert (first, second) == ("job_ses_one", "job_ses_two")
    assert not without_waiting  # the one writer finished the first claim first


def _claim_statement() -> Any:
    """The statement a claim runs, as the repository runs it (not run)."""
    return _CLAIM.statement


async def test_the_claim_query_locks_with_skip_locked_where_the_dialect_has_it() -> None:
    query = _claim_statement()
    on_postgresql = str(query.compile(dialect=postgresql.dialect()))  # type: ignore[no-untyped-call]
    on_sqlite = str(query.compile(dialect=sqlite.dialect()))
    assert "FOR UPDATE SKIP LOCKED" in on_postgresql
    assert "FOR UPDATE" not in on_sqlite


@pytest.mark.sqlite_only
async def test_the_claim_finds_an_earlier_active_job_by_status_not_by_the_sessions_history(
    database: Database, settings: Settings
) -> None:
    """The check "has this session an earlier active job?" seeks the active statuses in the
    session's jobs: through `(session_id, number)` alone it would walk every job the
    session ever ran, a cost that grows with the session's history, on the writer and
    holding the lock."""
    compiled = _claim_statement().compile(dialect=sqlite.dialect())
    values = {"now": utcnow().isoformat(), "limit": 10, "owner": "w", "until": None}
    params = [values.get(name, compiled.params[name]) for name in compiled.positiontup]
    path = make_url(settings.database_url).database
    assert path is not None
    with closing(sqlite3.connect(path)) as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {compiled}", params).fetchall()

    earlier = {detail for *_, detail in plan if "earlier" in detail}
    assert earlier == {
        "SEARCH earlier USING INDEX ix_jobs_session_status_number "
        "(session_id=? AND status=? AND number<?)"
    }


def _sqlite_steps(settings: Settings, statement: Any, values: dict[str, Any]) -> int:
    """SQLite virtual-machine steps (in hundreds) that `statement` takes, rolled back:
    how many rows it reads, whatever the machine's speed."""
    compiled = statement.compile(dialect=sqlite.dialect())
    params = [values.get(name, compiled.params[name]) for name in compiled.positiontup]
    path = make_url(settings.database_url).database
    assert path is not None
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.set_progress_handler(step, 100)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(str(compiled), params).fetchall()
        connection.execute("ROLLBACK")
    return steps


async def _queue(database: Database, first: int, count: int) -> None:
    """`count` queued jobs, each in a session of its own."""

    async def queue(db: AsyncSession) -> None:
        sessions = [f"s{n}" for n in range(first, first + count)]
        db.add_all(Session(id=session_id, tenant="acme") for session_id in sessions)
        await db.flush()
        db.add_all(
            Job(
                id=f"job_{session_id}",
                tenant="acme",
                session_id=session_id,
                status=JobStatus.queued,
            )
            for session_id in sessions
        )

    await database.write(queue)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("probe", [False, True], ids=["claim", "probe"])
async def test_a_claim_reads_as_far_as_its_limit_not_the_whole_queue(
    database: Database, settings: Settings, probe: bool
) -> None:
    """A claim of ten behind a burst of 2,000 queued turns reads ten, not all of them (as
    SQLite would, gathering the rows of `queued OR lease expired` to sort them), so a
    claim's cost on the writer does not grow with the queue."""
    statement = CLAIMABLE.statement if probe else _claim_statement()
    values = {"now": utcnow().isoformat(), "limit": 10, "owner": "w", "until": None}
    await _queue(database, 0, 20)
    short = _sqlite_steps(settings, statement, values)
    await _queue(database, 20, 2000)
    long = _sqlite_steps(settings, statement, values)

    assert long <= short + 2


async def _claim_batch(database: Database, *, limit: int) -> list[Job]:
    until = utcnow() + timedelta(seconds=30)
    return await database.write_statements(
        lambda db: JobRepository(db).claim("worker-a", until, limit=limit)
    )


async def test_a_batch_claim_takes_the_earliest_job_of_each_session_only(
    database: Database,
) -> None:
    async def seed(db: AsyncSession) -> None:
        for session_id in ("s1", "s2", "s3"):
            db.add(Session(id=session_id, tenant="acme"))
        await db.flush()
        for turn in (1, 2):
            for session_id in ("s1", "s2", "s3"):
                job_id = f"job_{session_id}_{turn}"
                db.add(
                    Job(id=job_id, tenant="acme", session_id=session_id, status=JobStatus.queued)
                )
                await db.flush()

    await database.write(seed)
    batch = await _claim_batch(database, limit=10)

    assert sorted(job.id for job in batch) == ["job_s1_1", "job_s2_1", "job_s3_1"]


async def test_a_batch_claim_stops_at_its_limit(database: Database) -> None:
    await _seed(database, "s1", "s2", "s3")

    batch = await _claim_batch(database, limit=2)

    assert [job.id for job in batch] == ["job_s1", "job_s2"]


async def test_a_claimed_job_comes_back_leased_and_as_stored(database: Database) -> None:
    await _seed(database, "s1")

    (claimed,) = await _claim_batch(database, limit=1)

    async with database.read() as db:
        stored = await JobRepository(db).get("job_s1")
    assert stored is not None
    assert (claimed.status, claimed.attempts, claimed.lease_owner) == ("running", 1, "worker-a#1")
    assert claimed.model_dump() == stored.model_dump()


async def test_a_job_claimed_again_names_its_new_attempt_in_its_lease(database: Database) -> None:
    await _seed(database, "s1")
    await _claim_batch(database, limit=1)

    async def expire(db: AsyncSession) -> None:
        job = await JobRepository(db).get("job_s1")
        assert job is not None
        job.lease_expires_at = utcnow() - timedelta(seconds=1)

    await database.write(expire)
    (again,) = await _claim_batch(database, limit=1)

    assert (again.attempts, again.lease_owner) == (2, "worker-a#2")


@pytest.mark.parametrize(
    ("statuses", "lease_expired", "claimable"),
    [
        ((), False, False),
        (("queued",), False, True),
        (("running", "queued"), False, False),  # behind its session's running turn
        (("running",), True, True),  # a lease that ran out is taken over
        (("running",), False, False),
        (("succeeded", "queued"), False, True),
    ],
)
async def test_the_claim_probe_sees_a_job_exactly_when_a_claim_would_take_one(
    database: Database, statuses: tuple[str, ...], lease_expired: bool, claimable: bool
) -> None:
    now = utcnow()
    lease_end = now - timedelta(seconds=1) if lease_expired else now + timedelta(seconds=60)

    async def seed(db: AsyncSession) -> None:
        db.add(Session(id="s1", tenant="acme"))
        await db.flush()
        for n, status in enumerate(statuses):
            job = Job(id=f"job_{n}", tenant="acme", session_id="s1", status=JobStatus(status))
            if status == "running":
                job.lease_owner, job.lease_expires_at = "w#1", lease_end
            db.add(job)
            await db.flush()

    await database.write(seed)
    probed = await database.peek(CLAIMABLE, {"now": now})
    taken = await _claim_batch(database, limit=10)

    assert bool(taken) is claimable
    assert bool(probed) is claimable


async def test_a_runner_looks_before_it_claims_unless_its_last_claim_took_all_it_asked(
    database: Database, settings: Settings
) -> None:
    """An idle runner's polls are reads, never a queued write; a runner whose last claim
    filled its free slots claims again at once when a slot frees (the look would cost a
    read per job for a yes)."""
    await _seed(database, "s1", "s2", "s3")
    runner = Runner(settings, database, *cast(Any, (None, None, None, None)), worker_id="w")
    looks: list[Any] = []
    peek = database.peek

    async def counted_peek(statement: Any, params: Any) -> Any:
        looks.append(statement)
        return await peek(statement, params)

    database.peek = counted_peek  # type: ignore[method-assign]

    first = await runner._claim(2)
    looked_first = len(looks)
    second = await runner._claim(2)
    looked_second = len(looks)
    third = await runner._claim(2)

    assert ([job.id for job in first], looked_first) == (["job_s1", "job_s2"], 1)
    assert ([job.id for job in second], looked_second) == (["job_s3"], 1)
    assert (third, len(looks)) == ([], 2)


async def test_after_a_claim_that_failed_a_runner_looks_first_again(
    database: Database, settings: Settings
) -> None:
    """A failed claim says nothing about the queue: the next claim does not skip the look
    on the strength of the claim before it."""
    await _seed(database, "s1", "s2", "s3")
    runner = Runner(settings, database, *cast(Any, (None, None, None, None)), worker_id="w")
    looks: list[Any] = []
    peek, write_statements = database.peek, database.write_statements

    async def counted_peek(statement: Any, params: Any) -> Any:
        looks.append(statement)
        return await peek(statement, params)

    async def unavailable(work: Any) -> Any:
        raise OperationalError("BEGIN IMMEDIATE", (), Exception("database is locked"))

    database.peek = counted_peek  # type: ignore[method-assign]
    await runner._claim(1)  # took all it asked for
    database.write_statements = unavailable  # type: ignore[method-assign]
    with pytest.raises(OperationalError):
        await runner._claim(1)  # no look: the claim before was full
    database.write_statements = write_statements  # type: ignore[method-assign]
    looked_before = len(looks)
    (job,) = await runner._claim(1)

    assert (looked_before, len(looks), job.id) == (1, 2, "job_s2")
