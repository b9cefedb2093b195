"""The agent loop's ports, backed by the database and the live hub.

Every step the loop records is a unit of work committed before the loop goes on: what
a client saw happen survives a crash at the next line. Two exceptions: a chat turn's
last answer, which commits with the job's end (the loop goes on to nothing but that
end), and a response whose tool calls only read, which commits with their results once
they ran (nothing happened that a crash before that commit would leave unlogged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.task_checkpoints import CheckpointRow
from app.domain.items import (
    AssistantMessage,
    ItemPayload,
    Origin,
    ToolResult,
    ToolUseBlock,
)
from app.domain.tasks import TASK_WRITE_TOOLS
from app.domain.usage import Usage
from app.engine.loop import CANCELLED, INTERRUPTED_BY_USER, Answered, Note, Results, Step
from app.engine.requests import unanswered_tool_uses
from app.engine.tools import ToolOutput
from app.services.events import record_event
from app.services.items import append_answered, append_item
from app.services.live import LiveHub
from app.services.tasks import keep_checkpoint
from app.services.turn_control import take_steers
from app.worker.job_session import JobSession

Writes = Callable[[AsyncSession], Awaitable[list[int]]]
"""A unit's work that appends items; returns their seqs."""
Write = Callable[[AsyncSession], Awaitable[object]]
"""Work done in a transaction that writes something else too (the job's end)."""


@dataclass
class _DeferredAnswer:
    """Items written by the job's end (the answer that ends a turn, or the results that
    close the calls a stopped turn left open): what it writes, the items, the task
    checkpoint its write keeps (the one the job owed), and where the end's transaction
    put them (the last run of that unit: a unit run again tells it anew)."""

    writes: Writes
    payloads: list[ItemPayload]
    checkpoint: CheckpointRow | None
    seqs: list[int] = field(default_factory=list)


def _after_results(items: Sequence[ItemPayload]) -> bool:
    """A step ended here: its tool results are the last items, and the next request is
    still to be built (where a steer goes)."""
    return bool(items) and isinstance(items[-1], ToolResult)


def writes_tasks(message: AssistantMessage) -> bool:
    return any(
        isinstance(block, ToolUseBlock) and block.name in TASK_WRITE_TOOLS
        for block in message.content
    )


class DbTurnStore:
    """The loop's store over the job's session held in memory (`JobSession`): a step
    costs one probe read, and each write one transaction whose items are kept without
    being read back. A response whose calls change something is written on its own,
    before they run; one whose calls only read, with their results (one transaction for
    the step).

    With `answer_with_end`, the answer that ends the turn is not written on its own: its
    write goes to the transaction that records the job's end (`ending`), one transaction
    less per turn. Nothing reads the log in between, the answer's events still come
    before the job's status, and a job that ends without that transaction (its lease
    lost, the process gone) is resumed from the log, asking the LLM again."""

    def __init__(
        self, session: JobSession, *, answer_with_end: bool = False, takes_steers: bool = False
    ) -> None:
        self.session = session
        self.job = session.job
        self._answer_with_end = answer_with_end
        self._takes_steers = takes_steers  # a chat turn's: steers are messages to it
        self._reading: Answered | None = None  # a response whose calls only read, as they run
        self._answer: _DeferredAnswer | None = None  # until the end takes its write
        self._handed: _DeferredAnswer | None = None  # once it did
        # what this store appended (the answer handed to the end's write included), in
        # order: the turn's memory cleans their texts before that write (`clean_ahead`)
        self.written: list[ItemPayload] = []

    async def segment(self) -> list[ItemPayload]:
        """The segment, with the steers waiting for the turn taken into it first when the
        step before ended with its tool results (`take_steers`): their user text follows
        the results, so the next request's user message carries both."""
        await self.session.refresh()
        held = self.session
        steer = self._takes_steers and held.steer_pending and not held.cancel_requested
        if steer and _after_results(held.items):
            await self._take_steers()
        return list(self.session.items)

    async def _take_steers(self) -> None:
        """Take the session's waiting steers into this turn: their jobs end and their
        user items are appended in one fenced transaction, so each is taken once."""
        job = self.job

        async def take(db: AsyncSession) -> list[tuple[int, ItemPayload]]:
            return await take_steers(db, job)

        try:
            taken = await self.session.database.write_statements(take)
        except BaseException:
            self.session.invalidate()
            raise
        for seq, payload in taken:
            self.written.append(payload)
            self.session.appended(seq, payload)
        if taken and not self.session.view.tasks_loaded:  # the log moved under it meanwhile
            await self.session.refresh()

    async def cancel_requested(self) -> bool:
        """As of the step's probe; a cancel asked in this process also stops the job's
        task at once (the runner is told after the commit)."""
        return self.session.cancel_requested

    async def record(self, step: Step) -> None:
        if isinstance(step, Note):
            await self._append(None, [step.message])
        elif isinstance(step, Results):
            answer, self._reading = self._reading, None
            if answer is not None or step.results:
                await self._append(answer, step.results)
        elif step.calls_change:
            await self._append(step, ())
        elif not step.ends_turn:
            self._reading = step
        elif self._answer_with_end:
            writes = self._writes(step, ())
            self._answer = _DeferredAnswer(writes, [step.message], self.session.checkpoint)
            self.written.append(step.message)
        else:
            await self._append(step, ())

    def ending(self, then: Write) -> Write:
        """The write of the job's end: the turn's answer, if it waits for it, then `then`."""
        answer, self._answer = self._answer, None
        if answer is None:
            return then
        self._handed = answer

        async def write(db: AsyncSession) -> None:
            answer.seqs = await answer.writes(db)
            await then(db)

        return write

    def ended(self) -> None:
        """The job's end committed (with the answer, if it took it): the session held in
        memory holds the answer too, so the session's next turn in this process reads
        nothing for it."""
        if (answer := self._handed) is not None:
            self._checkpoint_kept(answer.checkpoint)
            for seq, payload in zip(answer.seqs, answer.payloads, strict=True):
                self.session.known(seq, payload)

    async def close_at_end(self) -> list[ToolResult]:
        """Results for the calls the log leaves unanswered, written by the job's end
        (`ending`), so the job never ends with a `tool_use` open: interrupted by the user
        when the stop was an interrupt, else cancelled. Reads the segment (and the flags)
        once more; the caller's turn is over, so nothing else is deferred."""
        items = await self.segment()
        reason = INTERRUPTED_BY_USER if self.session.interrupt_requested else CANCELLED
        results = [
            ToolResult(tool_use_id=block.id, content=reason, is_error=True, name=block.name)
            for block in unanswered_tool_uses(items)
        ]
        if results:
            writes = self._writes(None, results)
            self._answer = _DeferredAnswer(writes, list(results), self.session.checkpoint)
            self.written.extend(results)
        return results

    async def _append(self, answer: Answered | None, items: Sequence[ItemPayload]) -> None:
        """Append `answer`, then `items`, in one transaction."""
        checkpoint = self.session.checkpoint
        work = self._writes(answer, items)
        payloads = [answer.message, *items] if answer is not None else list(items)
        self.written.extend(payloads)
        try:
            seqs = await self.session.database.write_statements(work)
        except BaseException:
            self.session.invalidate()
            raise
        self._checkpoint_kept(checkpoint)
        for seq, payload in zip(seqs, payloads, strict=True):
            self.session.appended(seq, payload)

    def _checkpoint_kept(self, checkpoint: CheckpointRow | None) -> None:
        """A committed write kept `checkpoint`: the job owes it no more (unless a later
        load made it owe another)."""
        if checkpoint is self.session.checkpoint:
            self.session.checkpoint = None

    def _writes(self, answer: Answered | None, items: Sequence[ItemPayload]) -> Writes:
        """What appending `answer` (the LLM's) and then `items` (the system's: tool results,
        notes) writes, as a unit's work; returns their seqs."""
        job = self.job
        checkpoint = self.session.checkpoint

        async def work(db: AsyncSession) -> list[int]:
            seqs = []
            if answer is not None:  # its place, its request, and what it cost
                row = await append_answered(
                    db,
                    job.session_id,
                    answer.message,
                    turn=job.turn,
                    job_id=job.id,
                    wrote_tasks=writes_tasks(answer.message),
                    usage=answer.usage,
                    carried_reminder=answer.reminded,
                )
                seqs.append(row.seq)
                await _count(db, job, answer.usage)
            for payload in items:
                row = await append_item(
                    db, job.session_id, payload, Origin.system, turn=job.turn, job_id=job.id
                )
                seqs.append(row.seq)
            if checkpoint is not None:  # after the appends, which hold the session's row
                await keep_checkpoint(db, job.session_id, checkpoint)
            return seqs

        return work


async def _count(db: AsyncSession, job: Job, usage: Usage) -> None:
    """A response's usage in the job's counters and as an event (the session's was added
    with the request it answered)."""
    await JobRepository(db).add_usage(job.id, usage)
    await record_event(db, job.session_id, "usage", usage.model_dump(), job_id=job.id)


class HubTurnEvents:
    """Text deltas and tool progress, live only."""

    def __init__(self, hub: LiveHub, job: Job) -> None:
        self.hub = hub
        self.job = job

    def _send(self, type_: str, data: dict[str, object]) -> None:
        self.hub.transient(type_, self.job.session_id, self.job.id, {"job_id": self.job.id, **data})

    async def text_delta(self, text: str, index: int) -> None:
        self._send("text.delta", {"index": index, "text": text})

    async def tool_started(self, block: ToolUseBlock) -> None:
        self._send("tool.started", {"tool_use_id": block.id, "name": block.name})

    async def tool_finished(self, block: ToolUseBlock, output: ToolOutput) -> None:
        self._send(
            "tool.finished",
            {"tool_use_id": block.id, "name": block.name, "is_error": output.is_error},
        )
