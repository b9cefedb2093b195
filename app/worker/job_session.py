"""A running job's session, held in memory between its steps.

A job loads its segment and task list once, keeps them current from its own
writes, and asks the database one question per step (`SessionRepository.probe`):
has the log moved past what this job holds (a REST task change, a client's item),
and was its cancel asked. Only when the log moved is anything else read.

The log stays the truth: whenever the job's picture may be off (its own write landed
after someone else's, or a write failed half-way in memory), the picture is dropped
and read again whole. A load that replayed a long stretch of task operations leaves a
task checkpoint (`app.services.tasks`), written with the job's next append.

A chat turn hands what it held to the session's next turn in this process
(`picture` / `adopt`, kept in `app.worker.pictures`): the next turn starts from it and
reads only what the log gained since, usually the one user item that queued it, instead
of the whole segment and task list again. The picture names the log's end it is true
for, so a write by anyone else in between is read like any other catch-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import Job
from app.db.repositories.sessions import Probe, peek_probe
from app.db.repositories.task_checkpoints import CheckpointRow
from app.domain.items import ItemPayload
from app.domain.reminder import ReminderState
from app.domain.tasks import TaskStore
from app.engine.requests import Conversation
from app.services.items import segment_tail
from app.services.tasks import checkpoint_of, rebuild, task_op_of_payload, task_ops


@dataclass(frozen=True)
class Picture:
    """What a job held of its session when it stopped: the segment's items and the task
    list, both as of `last_seq`. Its one owner may go on changing `tasks`."""

    segment: int
    last_seq: int
    items: list[ItemPayload]
    tasks: TaskStore
    # the messages built from `items` (`app.engine.requests`), when a turn built them
    conversation: Conversation | None = None


class JobSession:
    def __init__(
        self, database: UnitsOfWork, job: Job, *, checkpoint_every: int | None = None
    ) -> None:
        """`checkpoint_every`: see `checkpoint_of` (None: this job leaves none)."""
        self.database = database
        self.job = job
        self.checkpoint_every = checkpoint_every
        # a task checkpoint due from the last load, for the next append to write
        self.checkpoint: CheckpointRow | None = None
        self.segment_no: int | None = None
        self.last_seq = 0
        self.items: list[ItemPayload] = []
        self.tasks = TaskStore()
        self.reminder = ReminderState(0, 0, 0)
        self.cancel_requested = False
        self._tasks_loaded = False
        # the next step's probe, when something read it already (the turn's start)
        self._probed: Probe | None = None

    def adopt(self, picture: Picture | None) -> None:
        """Start from what an earlier job of the session held (None: from the log)."""
        if picture is None:
            return
        self.segment_no, self.last_seq = picture.segment, picture.last_seq
        self.items, self.tasks = list(picture.items), picture.tasks
        self._tasks_loaded = True

    def known(self, seq: int, payload: ItemPayload) -> None:
        """An item known to be in the log at `seq` without reading it (the user message
        that queued this turn): held at once when it directly follows what this job
        holds, so the turn's first step reads nothing of the log; otherwise the next
        `refresh` reads it with whatever else the log gained."""
        if self.segment_no is not None and seq == self.last_seq + 1:
            self.appended(seq, payload)

    def picture(self, conversation: Conversation | None = None) -> Picture | None:
        """What this job holds, for the session's next job (with the messages a turn built
        from it); None when it holds nothing whole (never loaded, or dropped after a
        failed write)."""
        if self.segment_no is None or not self._tasks_loaded:
            return None
        return Picture(self.segment_no, self.last_seq, self.items, self.tasks, conversation)

    def probed(self, probe: Probe) -> None:
        """What the next step's probe would read, read already: a turn's start reads its
        session's row, which says it, and its first step then reads nothing more."""
        self._probed = probe

    async def refresh(self) -> None:
        """The step's one probe, and a read of whatever moved since the last one."""
        probe, self._probed = self._probed, None
        if probe is None:
            probe = await peek_probe(self.database, self.job.session_id, self.job.id)
        if probe is None:  # the session or the job is gone: stop
            self.cancel_requested = True
            return
        self.cancel_requested = probe.cancel_requested
        self.reminder = probe.reminder
        if probe.segment != self.segment_no or probe.last_seq > self.last_seq:

            async def catch_up(db: AsyncSession) -> None:
                await self._catch_up(db, probe.segment, probe.last_seq)

            await self.database.read_statements(catch_up)

    async def _catch_up(self, db: AsyncSession, segment: int, last_seq: int) -> None:
        if not self._tasks_loaded:
            rebuilt = await rebuild(db, self.job.session_id)
            self.tasks = rebuilt.store
            if self.checkpoint_every is not None:
                self.checkpoint = checkpoint_of(rebuilt, self.checkpoint_every)
        else:
            for op in await task_ops(db, self.job.session_id, after_seq=self.last_seq):
                self.tasks.apply_or_skip(op)
        if segment != self.segment_no:
            self.segment_no, self.items = segment, []
            tail = await segment_tail(db, self.job.session_id, segment, 0)
        else:
            tail = await segment_tail(db, self.job.session_id, segment, self.last_seq)
        self.items.extend(payload for _, payload in tail)
        self.last_seq = max(last_seq, tail[-1][0] if tail else 0)
        self._tasks_loaded = True

    def appended(self, seq: int, payload: ItemPayload, *, tasks_applied: bool = False) -> None:
        """Keep the picture current with an item this job just wrote at `seq`."""
        if seq != self.last_seq + 1:  # someone else wrote in between: read it all again
            self.invalidate()
            return
        self.items.append(payload)
        self.last_seq = seq
        if not tasks_applied and (op := task_op_of_payload(payload)) is not None:
            self.tasks.apply_or_skip(op)

    def invalidate(self) -> None:
        """Forget everything held; the next `refresh` reads the segment and tasks whole."""
        self.segment_no = None
        self.last_seq = 0
        self.items = []
        self._tasks_loaded = False
