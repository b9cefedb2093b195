"""The runner: claim a job under a lease, run it, record how it ended.

Durability comes from the job table, not from this process: a job is claimed
with a lease that a heartbeat renews; if the process dies, the lease expires and
any runner claims the job again and resumes it from the log. The asyncio tasks
here only carry work the table already holds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from app.db.engine import Database
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.ids import new_id
from app.engine.llm import LLM, LLMError
from app.engine.loop import CANCELLED, close_dangling_tool_uses
from app.engine.pieces import PieceCatalog
from app.services.jobs import set_status
from app.services.live import LiveHub
from app.settings import Settings
from app.tools.registry import ToolRegistry
from app.worker.handlers import HANDLERS, Deps, Outcome, problem, remember_turn
from app.worker.idle import idle
from app.worker.piece_runner import run_piece
from app.worker.turn_store import DbTurnStore

logger = logging.getLogger("strata.runner")

StopReason = Literal["cancel", "lease_lost", "shutdown"]


@dataclass
class _Running:
    job: Job
    task: asyncio.Task[None] | None = None
    stop_reason: StopReason | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


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
    ) -> None:
        self.settings = settings
        self.database = database
        self.llm = llm
        self.tools = tools
        self.hub = hub
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{new_id('w')[-6:]}"
        self.deps = Deps(settings, database, hub, llm, tools, pieces)
        self._running: dict[str, _Running] = {}
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Tell the runner new work may be there (saves a poll interval)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        logger.info("runner %s started", self.worker_id)
        async with asyncio.TaskGroup() as group:
            while not stop.is_set():
                free = self.settings.worker_concurrency - len(self._running)
                if free > 0:
                    try:
                        jobs = await self._claim(free)
                    except Exception:  # the database is away: keep the runner alive
                        logger.exception("runner %s could not claim a job", self.worker_id)
                        jobs = []
                    for job in jobs:
                        running = _Running(job=job)
                        self._running[job.id] = running
                        running.task = group.create_task(self._run_job(running))
                    if len(jobs) == free:
                        continue  # there may be more
                await self._idle(stop)
            await self._shut_down()
        logger.info("runner %s stopped", self.worker_id)

    async def _shut_down(self) -> None:
        """Let running jobs finish their step for a moment, then hand the rest back.

        Cancelling a job in the middle of a database call can leave its connection
        holding a lock, so jobs get a grace period before the cancel.
        """
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.settings.worker_shutdown_grace_seconds)
        for running in list(self._running.values()):
            self._stop_job(running, "shutdown")

    async def _idle(self, stop: asyncio.Event) -> None:
        await idle(self._wake, stop, self.settings.worker_poll_seconds)

    def _lease_until(self) -> Any:
        return utcnow() + timedelta(seconds=self.settings.job_lease_seconds)

    async def _claim(self, limit: int) -> list[Job]:
        """Take up to `limit` jobs in one transaction. A read looks first, so an idle
        runner's polls never take the (on SQLite, exclusive) write lock."""
        async with self.database.session(write=False) as db:
            if not await JobRepository(db).claimable_batch(utcnow(), limit=1):
                return []
        async with self.database.session(write=True) as db:
            repo = JobRepository(db)
            jobs = await repo.claimable_batch(utcnow(), limit=limit)
            resumed = [job.id for job in jobs if job.status == "running"]
            for job in jobs:
                await repo.take(job, self.worker_id, self._lease_until())
                await set_status(db, job, "running")
        for job in jobs:
            if job.id in resumed:
                logger.warning(
                    "job %s resumed after an expired lease (attempt %s)", job.id, job.attempts
                )
            self.hub.committed(job.session_id, job.id)
        return jobs

    def _stop_job(self, running: _Running, reason: StopReason) -> None:
        if running.stop_reason is None:
            running.stop_reason = reason
        if running.task is not None:
            running.task.cancel()

    async def _heartbeat(self, running: _Running) -> None:
        """Renew the lease until the job is done. It is stopped by an event, never
        cancelled: a cancel in the middle of a database call would leave its
        connection half-closed."""
        job = running.job
        while True:
            try:
                await asyncio.wait_for(
                    running.done.wait(), timeout=self.settings.job_heartbeat_seconds
                )
                return
            except TimeoutError:
                pass
            async with self.database.session(write=True) as db:
                repo = JobRepository(db)
                held = await repo.renew_lease(job.id, self.worker_id, self._lease_until())
                current = await repo.get(job.id)
            if running.done.is_set():
                return  # the job ended meanwhile (no longer running); nothing to stop
            if not held:
                logger.warning("job %s: lease lost, stopping here", job.id)
                self._stop_job(running, "lease_lost")
                return
            if current is not None and current.cancel_requested:
                self._stop_job(running, "cancel")
                return

    async def _run_job(self, running: _Running) -> None:
        """Never raises: a job that cannot even be settled keeps its lease, and once that
        expires any runner resumes it. The runner itself must outlive every job."""
        job = running.job
        heartbeat = asyncio.create_task(self._heartbeat(running), name=f"heartbeat-{job.id}")
        try:
            await self._settle(running)
        except Exception:
            logger.exception("job %s could not be settled; its lease will expire", job.id)
        finally:
            running.done.set()
            await heartbeat
            self._running.pop(job.id, None)
            self.wake()

    async def _settle(self, running: _Running) -> None:
        job = running.job
        try:
            await self._execute(job)
        except asyncio.CancelledError:
            await asyncio.shield(self._after_stop(running))
        except LLMError as exc:
            error = problem(exc.slug, "LLM call failed", exc.detail)
            also = remember_turn(self.deps, job) if job.piece == "chat" else None
            await self._finish(job, Outcome("failed", error=error, also=also))
        except Exception as exc:
            logger.exception("job %s failed", job.id)
            detail = f"{type(exc).__name__}: {exc}"
            await self._finish(
                job, Outcome("failed", error=problem("job-crashed", "Job failed", detail))
            )

    async def _execute(self, job: Job) -> None:
        """Chat, compaction and summaries have their own handlers; any other piece is a
        workflow for the piece runner (which fails the job if it knows no such piece)."""
        handler = HANDLERS.get(job.piece, run_piece)
        await self._finish(job, await handler(self.deps, job))

    async def _after_stop(self, running: _Running) -> None:
        job = running.job
        if running.stop_reason == "cancel":
            await close_dangling_tool_uses(DbTurnStore(self.database, self.hub, job), CANCELLED)
            also = remember_turn(self.deps, job) if job.piece == "chat" else None
            await self._finish(job, Outcome("cancelled", also=also))
        elif running.stop_reason == "shutdown":
            await self._hand_back(job)
        # lease_lost: another runner owns the job now; touch nothing

    async def _hand_back(self, job: Job) -> None:
        """Graceful shutdown: put the job back in the queue for any runner to resume."""
        async with self.database.session(write=True) as db:
            current = await JobRepository(db).get(job.id)
            if current is None or current.lease_owner != self.worker_id:
                return
            current.lease_owner = None
            current.lease_expires_at = None
            await set_status(db, current, "queued")
        self.hub.committed(job.session_id, job.id)

    async def _finish(self, job: Job, outcome: Outcome) -> None:
        async with self.database.session(write=True) as db:
            current = await JobRepository(db).get(job.id)
            if current is None or current.lease_owner != self.worker_id:
                return  # the lease was lost meanwhile; the new owner decides
            if outcome.also is not None:
                await outcome.also(db)
            await set_status(
                db, current, outcome.status, error=outcome.error, result=outcome.result
            )
        self.hub.committed(job.session_id, job.id)
        self.wake()  # a finished job may have queued another (summaries)
