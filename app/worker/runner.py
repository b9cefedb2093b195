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
from app.engine.loop import CANCELLED, TurnConfig, close_dangling_tool_uses, run_turn
from app.services.chat import append_turn_input
from app.services.compaction import CompactionFailed, compact_session
from app.services.jobs import set_status
from app.services.live import LiveHub
from app.services.sessions import get_session
from app.services.tasks import LogTaskGateway
from app.settings import Settings
from app.tools.registry import ToolContext, ToolRegistry
from app.worker.reminder import TaskReminder
from app.worker.turn_store import DbTurnStore, HubTurnEvents

logger = logging.getLogger("strata.runner")

StopReason = Literal["cancel", "lease_lost", "shutdown"]
PROBLEM_PREFIX = "urn:strata:problem:"


def problem(slug: str, title: str, detail: str) -> dict[str, Any]:
    return {"type": PROBLEM_PREFIX + slug, "title": title, "detail": detail}


@dataclass
class _Running:
    job: Job
    task: asyncio.Task[None] | None = None
    stop_reason: StopReason | None = None
    heartbeat: asyncio.Task[None] | None = field(default=None)


class Runner:
    def __init__(
        self,
        settings: Settings,
        database: Database,
        llm: LLM,
        tools: ToolRegistry,
        hub: LiveHub,
        *,
        worker_id: str | None = None,
    ) -> None:
        self.settings = settings
        self.database = database
        self.llm = llm
        self.tools = tools
        self.hub = hub
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{new_id('w')[-6:]}"
        self._running: dict[str, _Running] = {}
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Tell the runner new work may be there (saves a poll interval)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        logger.info("runner %s started", self.worker_id)
        async with asyncio.TaskGroup() as group:
            while not stop.is_set():
                if len(self._running) < self.settings.worker_concurrency:
                    try:
                        job = await self._claim()
                    except Exception:  # the database is away: keep the runner alive
                        logger.exception("runner %s could not claim a job", self.worker_id)
                        job = None
                    if job is not None:
                        running = _Running(job=job)
                        self._running[job.id] = running
                        running.task = group.create_task(self._run_job(running))
                        continue
                await self._idle(stop)
            for running in list(self._running.values()):
                self._stop_job(running, "shutdown")
        logger.info("runner %s stopped", self.worker_id)

    async def _idle(self, stop: asyncio.Event) -> None:
        self._wake.clear()
        waiters = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(
                waiters,
                timeout=self.settings.worker_poll_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiter in waiters:
                waiter.cancel()

    def _lease_until(self) -> Any:
        return utcnow() + timedelta(seconds=self.settings.job_lease_seconds)

    async def _claim(self) -> Job | None:
        async with self.database.session(write=True) as db:
            repo = JobRepository(db)
            job = await repo.claimable(utcnow())
            if job is None:
                return None
            resumed = job.status == "running"
            await repo.take(job, self.worker_id, self._lease_until())
            await set_status(db, job, "running")
        if resumed:
            logger.warning(
                "job %s resumed after an expired lease (attempt %s)", job.id, job.attempts
            )
        self.hub.committed(job.session_id, job.id)
        return job

    def _stop_job(self, running: _Running, reason: StopReason) -> None:
        if running.stop_reason is None:
            running.stop_reason = reason
        if running.task is not None:
            running.task.cancel()

    async def _heartbeat(self, running: _Running) -> None:
        job = running.job
        while True:
            await asyncio.sleep(self.settings.job_heartbeat_seconds)
            async with self.database.session(write=True) as db:
                repo = JobRepository(db)
                held = await repo.renew_lease(job.id, self.worker_id, self._lease_until())
                current = await repo.get(job.id)
            if not held:
                logger.warning("job %s: lease lost, stopping here", job.id)
                self._stop_job(running, "lease_lost")
                return
            if current is not None and current.cancel_requested:
                self._stop_job(running, "cancel")
                return

    async def _run_job(self, running: _Running) -> None:
        job = running.job
        heartbeat = asyncio.create_task(self._heartbeat(running))
        try:
            await self._execute(job)
        except asyncio.CancelledError:
            await asyncio.shield(self._after_stop(running))
        except LLMError as exc:
            await self._finish(
                job, "failed", error=problem(exc.slug, "LLM call failed", exc.detail)
            )
        except Exception as exc:
            logger.exception("job %s failed", job.id)
            await self._finish(
                job,
                "failed",
                error=problem("job-crashed", "Job failed", f"{type(exc).__name__}: {exc}"),
            )
        finally:
            heartbeat.cancel()
            self._running.pop(job.id, None)
            self.wake()

    async def _execute(self, job: Job) -> None:
        if job.piece == "compact":
            await self._compact(job)
        else:
            await self._chat(job)

    async def _compact(self, job: Job) -> None:
        try:
            segment = await self._compact_now(job)
        except CompactionFailed as exc:
            error = problem("compaction-failed", "Compaction failed", exc.detail)
            await self._finish(job, "failed", error=error)
        else:
            await self._finish(job, "succeeded", result={"segment": segment})

    async def _compact_now(self, job: Job) -> int:
        return await compact_session(
            settings=self.settings,
            database=self.database,
            hub=self.hub,
            llm=self.llm,
            tenant=job.tenant,
            session_id=job.session_id,
            job_id=job.id,
            turn=job.turn,
        )

    async def _auto_compact(self, job: Job) -> None:
        """Mid-turn compaction; if it fails the turn goes on (the failure is an event)."""
        try:
            await self._compact_now(job)
        except CompactionFailed as exc:
            logger.warning("job %s: automatic compaction failed: %s", job.id, exc.detail)

    async def _chat(self, job: Job) -> None:
        async with self.database.session(write=True) as db:
            session = await get_session(db, job.tenant, job.session_id)
            await append_turn_input(db, job)
        self.hub.committed(job.session_id, job.id)
        store = DbTurnStore(self.database, self.hub, job)
        tool_names = session.tools if session.tools is not None else self.tools.names
        config = TurnConfig(
            model=session.model or self.settings.model,
            system=session.system_prompt,
            tool_names=tool_names,
            max_iterations=self.settings.agent_max_iterations,
            max_tokens=self.settings.llm_max_tokens,
            interceptors=[TaskReminder(self.settings, self.database, job.session_id)],
            context_window=self.settings.context_window_tokens,
            compact_ratio=self.settings.context_force_ratio,
            compact=lambda: self._auto_compact(job),
        )
        ctx = ToolContext(
            tenant=job.tenant,
            session_id=job.session_id,
            job_id=job.id,
            tasks=LogTaskGateway(self.database, self.hub, job),
        )
        outcome = await run_turn(
            self.llm, store, self.tools, ctx, config, HubTurnEvents(self.hub, job)
        )
        if outcome.status == "cancelled":
            await close_dangling_tool_uses(store, CANCELLED)
            await self._finish(job, "cancelled")
        elif outcome.status == "max_iterations":
            detail = (
                f"the agent made {outcome.iterations} LLM calls without ending its turn "
                f"(STRATA_AGENT_MAX_ITERATIONS={self.settings.agent_max_iterations})"
            )
            await self._finish(
                job, "failed", error=problem("agent-max-iterations", "Too many iterations", detail)
            )
        else:
            await self._finish(job, "succeeded", result={"text": outcome.final_text})

    async def _after_stop(self, running: _Running) -> None:
        job = running.job
        if running.stop_reason == "cancel":
            await close_dangling_tool_uses(DbTurnStore(self.database, self.hub, job), CANCELLED)
            await self._finish(job, "cancelled")
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

    async def _finish(
        self,
        job: Job,
        status: str,
        *,
        error: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        async with self.database.session(write=True) as db:
            current = await JobRepository(db).get(job.id)
            if current is None or current.lease_owner != self.worker_id:
                return  # the lease was lost meanwhile; the new owner decides
            await set_status(db, current, status, error=error, result=result)
        self.hub.committed(job.session_id, job.id)
