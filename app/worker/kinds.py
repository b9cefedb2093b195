"""One handler per job kind, and what each kind's job implies when it ends otherwise.

A handler decides how its job ends when it runs to the end. When the runner has to
end the job instead (the LLM call failed for good, the job crashed, it was cancelled),
it asks the same handler for the `also` of that ending: a chat turn still records its
memory, a piece job still gives its session's context back to the chat. So each kind's
failure and cancel behaviour lives next to its run, not in `if piece == "chat"` lines
in the runner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.domain.jobs import JobKind, JobStatus
from app.services.chat import append_turn_input
from app.worker.handlers import (
    Also,
    Deps,
    Outcome,
    problem,
    remember_turn,
    run_chat,
    run_compact,
    run_summarize,
)
from app.worker.piece_runner import piece_ended_otherwise, run_piece


def _nothing(deps: Deps, job: Job) -> Also | None:
    return None


@dataclass(frozen=True)
class Handler:
    run: Callable[[Deps, Job], Awaitable[Outcome]]
    # what an ending the handler did not decide itself still implies
    on_end: Callable[[Deps, Job], Also | None] = _nothing
    # what the job writes in the transaction that claims it, before it runs (prepared
    # statements only: the claim is a statement unit)
    on_claim: Callable[[AsyncSession, Job], Awaitable[None]] | None = None

    def failed(self, deps: Deps, job: Job, error: dict[str, Any]) -> Outcome:
        return Outcome(JobStatus.failed, error=error, also=self.on_end(deps, job))

    def cancelled(self, deps: Deps, job: Job) -> Outcome:
        return Outcome(JobStatus.cancelled, also=self.on_end(deps, job))


HANDLERS: dict[JobKind, Handler] = {
    # a turn queued behind another logs its user message as it starts
    JobKind.chat: Handler(run_chat, remember_turn, on_claim=append_turn_input),
    JobKind.compaction: Handler(run_compact),
    JobKind.summary: Handler(run_summarize),
    JobKind.piece: Handler(run_piece, piece_ended_otherwise),
}


async def _unknown_kind(deps: Deps, job: Job) -> Outcome:
    detail = f"job kind {job.kind!r} is not known to this server"
    return Outcome(JobStatus.failed, error=problem("unknown-kind", "Unknown job kind", detail))


def handler_of(job: Job) -> Handler:
    """The job's handler; a kind this server does not know fails the job, saying so."""
    try:
        return HANDLERS[JobKind(job.kind)]
    except ValueError:
        return Handler(_unknown_kind)
