"""The agent loop's ports, backed by the database and the live hub.

Every append is a unit of work committed before the loop goes on: what a client
saw happen survives a crash at the next line. Two exceptions: a chat turn's last
answer, which commits with the job's end (the loop goes on to nothing but that end),
and a response whose tool calls only read, which commits with their results once they
ran (nothing happened that a crash before that commit would leave unlogged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.db.repositories.task_checkpoints import CheckpointRow
from app.domain.items import AssistantMessage, ItemPayload, Origin, ToolUseBlock
from app.domain.tasks import TASK_WRITE_TOOLS
from app.domain.usage import Usage
from app.engine.tools import ToolOutput
from app.services.events import record_event
from app.services.items import append_answered, append_item
from app.services.live import LiveHub
from app.services.tasks import keep_checkpoint
from app.worker.job_session import JobSession

Group = tuple[Sequence[ItemPayload], Origin, Usage | None]
"""Items appended together, their origin, and the usage of the response they are."""
Writes = Callable[[AsyncSession], Awaitable[list[int]]]
"""A unit's work that appends items; returns their seqs."""


@dataclass
class _DeferredAnswer:
    """The answer that ends a turn, written by the job's end: what it writes, the item,
    the task checkpoint its write keeps (the one the job owed), and where the end's
    transaction put it (the last run of that unit: a unit run again tells it anew)."""

    writes: Writes
    payload: ItemPayload
    checkpoint: CheckpointRow | None
    seqs: list[int] = field(default_factory=list)


def writes_tasks(message: AssistantMessage) -> bool:
    return any(
        isinstance(block, ToolUseBlock) and block.name in TASK_WRITE_TOOLS
        for block in message.content
    )


class DbTurnStore:
    """The loop's store over the job's session held in memory (`JobSession`): a step
    costs one probe read, and each append one write transaction whose item is kept
    without being read back (a step whose calls only read: one for the step).

    With `answer_with_end`, the answer that ends the turn is not written on its own: its
    write goes to the transaction that records the job's end (`answer_write`), one
    transaction less per turn. Nothing reads the log in between, the answer's events
    still come before the job's status, and a job that ends without that transaction
    (its lease lost, the process gone) is resumed from the log, asking the LLM again."""

    def __init__(self, session: JobSession, *, answer_with_end: bool = False) -> None:
        self.session = session
        self.job = session.job
        # the request being answered carries the task reminder (set by the interceptor)
        self.reminder_pending = False
        self._answer_with_end = answer_with_end
        self._answer: _DeferredAnswer | None = None  # until the end takes its write
        self._handed: _DeferredAnswer | None = None  # once it did
        # what this store appended (the answer handed to the end's write included), in
        # order: the turn's memory cleans their texts before that write (`clean_ahead`)
        self.written: list[ItemPayload] = []

    async def segment(self) -> list[ItemPayload]:
        await self.session.refresh()
        return list(self.session.items)

    async def append(
        self, payload: ItemPayload, origin: Origin, usage: Usage | None = None
    ) -> None:
        await self.append_all([payload], origin, usage)

    async def append_answer(self, payload: ItemPayload, usage: Usage) -> None:
        if not self._answer_with_end:
            await self.append(payload, Origin.llm, usage)
            return
        writes = self._writes([([payload], Origin.llm, usage)])
        self._answer = _DeferredAnswer(writes, payload, self.session.checkpoint)
        self.written.append(payload)

    def answer_write(self) -> Callable[[AsyncSession], Awaitable[None]] | None:
        """The turn's answer, for the transaction of the job's end (None: none waits)."""
        answer, self._answer = self._answer, None
        if answer is None:
            return None
        self._handed = answer

        async def write(db: AsyncSession) -> None:
            answer.seqs = await answer.writes(db)

        return write

    def answer_committed(self) -> None:
        """The job's end committed with the answer: the session held in memory holds it
        too, so the session's next turn in this process reads nothing for it."""
        if (answer := self._handed) is not None:
            self._checkpoint_kept(answer.checkpoint)
            for seq in answer.seqs:
                self.session.known(seq, answer.payload)

    async def append_all(
        self, payloads: Sequence[ItemPayload], origin: Origin, usage: Usage | None = None
    ) -> None:
        """Append `payloads` in one transaction (an LLM response, or one step's tool
        results); `usage` is the response's, counted with it."""
        await self._append([(payloads, origin, usage)])

    async def append_step(
        self, assistant: ItemPayload, usage: Usage, results: Sequence[ItemPayload]
    ) -> None:
        await self._append([([assistant], Origin.llm, usage), (results, Origin.system, None)])

    async def _append(self, groups: Sequence[Group]) -> None:
        """Append the groups' items in one transaction, in order."""
        checkpoint = self.session.checkpoint
        work = self._writes(groups)
        payloads = [payload for group in groups for payload in group[0]]
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

    def _writes(self, groups: Sequence[Group]) -> Writes:
        """What appending the groups' items writes, as a unit's work; returns their seqs."""
        job = self.job
        reminded, self.reminder_pending = self.reminder_pending, False
        checkpoint = self.session.checkpoint

        async def work(db: AsyncSession) -> list[int]:
            seqs = []
            for payloads, origin, usage in groups:
                answered = _answered(payloads, origin)
                for payload in payloads:
                    if answered and payload is answered[0]:  # its place and its request
                        row = await append_answered(
                            db,
                            job.session_id,
                            payload,
                            turn=job.turn,
                            job_id=job.id,
                            wrote_tasks=any(writes_tasks(p) for p in answered),
                            usage=usage,
                            carried_reminder=reminded,
                        )
                    else:
                        row = await append_item(
                            db, job.session_id, payload, origin, turn=job.turn, job_id=job.id
                        )
                    seqs.append(row.seq)
                await _count(db, job, usage, request_counted=bool(answered))
            if checkpoint is not None:  # after the appends, which hold the session's row
                await keep_checkpoint(db, job.session_id, checkpoint)
            return seqs

        return work

    async def cancel_requested(self) -> bool:
        """As of the step's probe; a cancel asked in this process also stops the job's
        task at once (the runner is told after the commit)."""
        return self.session.cancel_requested


def _answered(payloads: Sequence[ItemPayload], origin: Origin) -> list[AssistantMessage]:
    """The group's LLM response (one request answered, counted with the first's append);
    none in a group of tool results or a client's items."""
    if origin is not Origin.llm:
        return []
    return [p for p in payloads if isinstance(p, AssistantMessage)]


async def _count(db: AsyncSession, job: Job, usage: Usage | None, *, request_counted: bool) -> None:
    """The usage of appended items, in the session's and the job's counters and as an
    event (the session's was added with the request the response answered, if any)."""
    if usage is None:
        return
    if not request_counted:
        await SessionRepository(db).add_usage(job.session_id, usage)
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
