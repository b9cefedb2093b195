"""The runner: claim a job under a lease, run it, record how it ended.

Durability comes from the job table, not from this process: a job is claimed
with a lease that a heartbeat renews; if the process dies, the lease expires and
any runner claims the job again and resumes it from the log. The asyncio tasks
here only carry work the table already holds.

The runner outlives the database: a claim, heartbeat, hand-back or finish that
fails on a transient database error (a lock held by another process, a restarting
server) is retried with backoff and logged once per outage, and a job whose step
failed that way is handed back to the queue instead of being failed. Every write a
job makes is fenced by its lease (`app.services.leases`), so a runner whose lease
was taken over stops at its next write, writing nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal, TypeVar

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database, is_transient
from app.db.models import Job
from app.db.repositories.jobs import JobRepository, any_claimable
from app.db.types import utcnow
from app.domain.ids import new_id
from app.domain.jobs import WAITING, JobStatus, interrupted_error
from app.domain.tool_policy import ToolRule
from app.engine.llm import LLM, LLMError
from app.engine.pieces import PieceCatalog
from app.engine.tools import ToolRegistry
from app.observability import context as log_context
from app.observability import tracing
from app.services.jobs import claim_jobs, set_status
from app.services.leases import JobDatabase, LeaseLost, fence, held_job
from app.services.live import LiveHub
from app.services.webhooks import turn_event
from app.settings import Settings
from app.worker.handlers import Deps, Outcome, problem
from app.worker.idle import idle
from app.worker.job_session import JobSession
from app.worker.kinds import handler_of
from app.worker.outage import Outage
from app.worker.turn_store import DbTurnStore

logger = logging.getLogger("strata.runner")

StopReason = Literal["cancel", "lease_lost", "shutdown"]
T = TypeVar("T")


@dataclass
class _Running:
    job: Job
    task: asyncio.Task[None] | None = None
    stop_reason: StopReason | None = None
    # once the job's work is over, its closing write is never interrupted
    settling: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def _nothing(db: AsyncSession) -> None:
    """A job's end that writes nothing more."""


class Runner:
    def __init__(
        self,
        settings: Settings,
        database: Database,
        llm: LLM,
        tools: ToolRegistry,
        hub: LiveHub,
        pieces: PieceCatalog,
        *,
        worker_id: str | None = None,
        operator_policy: tuple[ToolRule, ...] = (),
    ) -> None:
        self.settings = settings
        self.database = database
        self.llm = llm
        self.tools = tools
        self.hub = hub
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{new_id('w')[-6:]}"
        self.deps = Deps(settings, database, hub, llm, tools, pieces, operator_policy)
        self.ticked_at: float | None = None  # loop time of the last turn of the main loop
        self._running: dict[str, _Running] = {}
        self._wake = asyncio.Event()
        self._outage = Outage(logger, "runner", settings.db_retry_max_seconds)
        # the last claim took all it asked for: more work is likely queued
        self._claimed_full = False

    def wake(self) -> None:
        """Tell the runner new work may be there (saves a poll interval)."""
        self._wake.set()

    def cancel(self, job_id: str) -> None:
        """A cancel of `job_id` was committed: stop it now if it runs here."""
        running = self._running.get(job_id)
        if running is not None and not running.done.is_set():
            self._stop_job(running, "cancel")

    async def run(self, stop: asyncio.Event) -> None:
        logger.info("runner %s started", self.worker_id)
        loop = asyncio.get_running_loop()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._heartbeat(stop), name="strata-heartbeat")
            while not stop.is_set():
                self.ticked_at = loop.time()
                free = self.settings.worker_concurrency - len(self._running)
                jobs = await self._claim_safely(free) if free > 0 else []
                for job in jobs:
                    if (previous := self._running.get(job.id)) is not None:
                        self._stop_job(previous, "lease_lost")  # claimed again, see _run_job
                    running = _Running(job=job)
                    self._running[job.id] = running
                    running.task = group.create_task(self._run_job(running))
                if jobs and len(jobs) == free:
                    continue  # there may be more
                await self._idle(stop, self._wait_seconds(full=free <= 0))
            await self._shut_down()
        logger.info("runner %s stopped", self.worker_id)

    async def _claim_safely(self, limit: int) -> list[Job]:
        try:
            jobs = await self._claim(limit)
        except Exception as exc:  # the runner never dies of the database
            self._outage.failed(exc, "could not claim jobs")
            return []
        self._outage.recovered()
        return jobs

    async def _shut_down(self) -> None:
        """Let running jobs finish their step for a moment, then hand the rest back."""
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.settings.worker_shutdown_grace_seconds)
        for running in list(self._running.values()):
            self._stop_job(running, "shutdown")

    async def _idle(self, stop: asyncio.Event, seconds: float) -> None:
        await idle(self._wake, stop, seconds)

    def _wait_seconds(self, *, full: bool) -> float:
        """How long the loop waits unless woken. A runner with a free slot polls (work
        another process queued is seen no other way). A full one has nothing to claim
        until one of its jobs ends, which wakes it: it comes round only as often as
        `/readyz` needs to see it alive, a third of `background_stall_seconds` (at the
        benchmark's 0.05 s poll, 20 turns of the loop a second less while full)."""
        poll = self._outage.backoff(self.settings.worker_poll_seconds)
        if not full:
            return poll
        return max(poll, self.settings.background_stall_seconds / 3)

    def _lease_until(self) -> Any:
        return utcnow() + timedelta(seconds=self.settings.job_lease_seconds)

    async def _claim(self, limit: int) -> list[Job]:
        """Take up to `limit` jobs in one transaction, with what each writes as it starts
        (a queued turn's user message: one transaction less per turn).

        A read looks first, so an idle runner's polls never queue for the writer; not
        after a claim that took all it asked for (a busy runner, a job's end freeing a
        slot), where the look would mostly say yes."""
        if not self._claimed_full and not await any_claimable(self.database, utcnow()):
            return []

        async def claim(db: AsyncSession) -> list[Job]:
            return await claim_jobs(db, self.worker_id, self._lease_until(), limit=limit)

        async def claim_and_start(db: AsyncSession) -> list[Job]:
            jobs = await claim(db)
            for job in jobs:
                if (start := handler_of(job).on_claim) is not None:
                    await start(db, job)
            return jobs

        self._claimed_full = False  # until this claim says otherwise, even if it fails
        try:
            jobs = await self.database.write_statements(claim_and_start)
        except Exception as exc:
            if is_transient(exc):
                raise
            # one job's start failed and took the claim with it: claim alone, and each
            # job starts on its own (`_start_turn`), where a failure is that job's
            logger.warning("claiming with the jobs' starts failed (%s); claiming alone", exc)
            jobs = await self.database.write_statements(claim)
        self._claimed_full = len(jobs) == limit
        for job in jobs:
            if job.attempts > 1:
                logger.warning("job %s resumed (attempt %s)", job.id, job.attempts)
        return jobs

    def _stop_job(self, running: _Running, reason: StopReason) -> None:
        if running.stop_reason is None:
            running.stop_reason = reason
        if running.task is not None and not running.settling:
            running.task.cancel()

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Renew the leases of every running job in one transaction per interval, and
        stop the jobs whose lease was lost or whose cancel was asked. A failed renewal
        is retried at the next beat; fencing keeps a lost lease harmless meanwhile."""
        outage = Outage(logger, "heartbeat", self.settings.db_retry_max_seconds)
        while not stop.is_set():
            await idle(asyncio.Event(), stop, self.settings.job_heartbeat_seconds)
            running = [r for r in self._running.values() if not r.done.is_set()]
            if not running or stop.is_set():
                continue
            leases = {r.job.id: r.job.lease_owner or "" for r in running}
            until = self._lease_until()
            try:
                held, cancel = await self._renew(leases, until)
            except Exception as exc:
                outage.failed(exc, "could not renew leases")
                continue
            outage.recovered()
            for one in running:
                if one.done.is_set():
                    continue
                if one.job.id not in held:
                    logger.warning("job %s: lease lost, stopping here", one.job.id)
                    self._stop_job(one, "lease_lost")
                elif one.job.id in cancel:
                    self._stop_job(one, "cancel")

    async def _renew(self, leases: dict[str, str], until: Any) -> tuple[set[str], set[str]]:
        async def renew(db: AsyncSession) -> tuple[set[str], set[str]]:
            return await JobRepository(db).renew_leases(leases, until)

        return await self.database.write(renew)

    async def run_claimed(self, job: Job) -> None:
        """Run a job claimed outside this runner's loop to its end, its closing write
        included (the step-overhead benchmark drives one turn so). Never raises."""
        await self._run_job(_Running(job=job))

    async def _run_job(self, running: _Running) -> None:
        """Never raises: a job that cannot even be settled keeps its lease, and once that
        expires any runner resumes it. The runner itself must outlive every job."""
        job = running.job
        try:
            with log_context.bound(session=job.session_id, job=job.id):
                what = job.kind if job.piece is None else f"{job.kind} {job.piece}"
                logger.info("job %s (%s) claimed by runner %s", job.id, what, self.worker_id)
                attributes = {"strata.job_id": job.id, "strata.session_id": job.session_id or ""}
                with tracing.span(f"job {what}", attributes):  # the job's own trace
                    await self._settle(running)
        except Exception:
            logger.exception("job %s could not be settled; its lease will expire", job.id)
        finally:
            running.done.set()
            # after an outage longer than the lease this runner may have claimed the job
            # again (a new lease); the old run stopped at its fence and must not drop it
            if self._running.get(job.id) is running:
                del self._running[job.id]
            self.wake()

    async def _settle(self, running: _Running) -> None:
        job = running.job
        try:
            outcome = await self._execute(job)
        except asyncio.CancelledError:
            await asyncio.shield(self._after_stop(running))
            return
        except LeaseLost:
            logger.warning("job %s: another runner took it over; this one stops", job.id)
            return
        except LLMError as exc:
            error = problem(exc.slug, "LLM call failed", exc.detail)
            outcome = handler_of(job).failed(self.deps, job, error)
        except Exception as exc:
            if is_transient(exc):
                logger.warning("job %s: database unavailable (%s); handing it back", job.id, exc)
                running.settling = True
                await self._persist(job, self._hand_back)
                return
            logger.exception("job %s failed", job.id)
            detail = f"{type(exc).__name__}: {exc}"
            error = problem("job-crashed", "Job failed", detail)
            outcome = handler_of(job).failed(self.deps, job, error)
        running.settling = True
        await self._persist(job, lambda j: self._finish(j, outcome))

    async def _execute(self, job: Job) -> Outcome:
        """The handler of the job's kind runs it (`app.worker.kinds`)."""
        return await handler_of(job).run(self.deps, job)

    async def _after_stop(self, running: _Running) -> None:
        job = running.job
        if running.stop_reason == "cancel":
            # the calls it left open are answered in the transaction of its end
            store = DbTurnStore(JobSession(JobDatabase(self.database, job), job))
            try:
                await store.close_at_end()
            except LeaseLost:
                return
            outcome = handler_of(job).cancelled(self.deps, job)
            outcome = replace(outcome, also=store.ending(outcome.also or _nothing))
            await self._persist(job, lambda j: self._finish(j, outcome))
        elif running.stop_reason == "shutdown":
            await self._persist(job, self._hand_back)
        # lease_lost: another runner owns the job now; touch nothing

    async def _persist(self, job: Job, write: Callable[[Job], Awaitable[None]]) -> None:
        """Retry a job's closing write through a database outage, for as long as its
        lease lasts; after that another runner resumes the job from the log."""
        outage = Outage(logger, f"job {job.id}", self.settings.db_retry_max_seconds)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.job_lease_seconds
        while True:
            try:
                await write(job)
                return
            except LeaseLost:
                return
            except Exception as exc:
                if not is_transient(exc) or loop.time() >= deadline:
                    raise
                outage.failed(exc, "could not record its end")
                await asyncio.sleep(outage.backoff(self.settings.worker_poll_seconds))

    async def _hand_back(self, job: Job) -> None:
        """Put the job back in the queue for any runner to resume."""

        async def hand_back(db: AsyncSession) -> None:
            await fence(db, job)
            current = await held_job(db, job)
            current.lease_owner = None
            current.lease_expires_at = None
            await set_status(db, current, JobStatus.queued)

        await self._closing_write(hand_back)

    async def _closing_write(self, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """A job's closing write, one statement unit: a chat turn's end (its lease, its
        status, its memory, its events and webhook deliveries) is prepared statements; what
        reaches for the ORM (a piece job's state, a chain's walk, a summary job to queue)
        runs in the same unit, on a connection joined to its transaction
        (`app.db.writer`)."""
        return await self.database.write_statements(work)

    async def _finish(self, job: Job, outcome: Outcome) -> None:
        async def finish(db: AsyncSession) -> JobStatus:
            await fence(db, job)
            current = await held_job(db, job)
            ending = outcome
            if current.cancel_requested and outcome.status in WAITING:
                # cancelled while it ran (e.g. its parent ended): it does not wait for anyone
                ending = Outcome(JobStatus.cancelled)
            interrupted = (
                ending.status == JobStatus.cancelled
                and ending.error is None
                and await JobRepository(db).interrupt_requested(job.id)
            )
            if interrupted:
                ending = replace(ending, error=interrupted_error())
            if ending.also is not None:
                await ending.also(db)
            await set_status(db, current, ending.status, error=ending.error, result=ending.result)
            if interrupted:
                await turn_event(db, current, "turn.interrupted")
            return ending.status

        ended = await self._closing_write(finish)
        if outcome.committed is not None:
            outcome.committed()
        # the line that pairs with "claimed": a job's log says how its run ended
        logger.info("job %s %s (runner %s)", job.id, ended, self.worker_id)
