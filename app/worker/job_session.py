"""A running job's hold on its session: the session's view, read once a step.

The job reads its session through the process's view of it (`app.services.session_view`:
the segment's items, the task list and the request messages, as far as the log was read)
and keeps that view current with its own writes. Each step asks the database one
question (`SessionRepository.probe`): where the log ends, the reminder's counters,
whether the job's cancel (or interrupt) was asked, and whether a steer waits. Only
when the log moved past the view's end is anything else read, in one snapshot; a view
that may be off (a write failed half-way in memory) is forgotten and read again whole.
A load that replayed a long stretch of task operations leaves a task checkpoint
(`app.services.tasks`), written with the job's next append.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import Job
from app.db.repositories.sessions import Probe, peek_probe
from app.db.repositories.task_checkpoints import CheckpointRow
from app.domain.items import ItemPayload
from app.domain.reminder import ReminderState
from app.domain.tasks import TaskStore
from app.services.items import UNREAD
from app.services.session_view import SessionView
from app.services.tasks import checkpoint_of


class JobSession:
    def __init__(
        self,
        database: UnitsOfWork,
        job: Job,
        *,
        view: SessionView | None = None,
        checkpoint_every: int | None = None,
    ) -> None:
        """`view`: what the process has read of the session (None: nothing yet);
        `checkpoint_every`: see `checkpoint_of` (None: this job leaves none)."""
        self.database = database
        self.job = job
        self.view = view if view is not None else SessionView(job.session_id)
        self.checkpoint_every = checkpoint_every
        # a task checkpoint due from the last load, for the next append to write
        self.checkpoint: CheckpointRow | None = None
        self.reminder = ReminderState(0, 0, 0)
        self.cancel_requested = False
        self.interrupt_requested = False  # the cancel is the user's interrupt
        self.steer_pending = False  # a steer waits for this turn (`SessionRepository.probe`)
        # the next step's probe, when something read it already (the turn's start)
        self._probed: Probe | None = None

    @property
    def items(self) -> list[ItemPayload]:
        return self.view.items

    @property
    def tasks(self) -> TaskStore:
        return self.view.tasks

    @property
    def segment_no(self) -> int | None:
        return self.view.segment if self.view.tasks_loaded else None

    @property
    def last_seq(self) -> int:
        return self.view.last_seq

    def known(self, seq: int, payload: ItemPayload) -> None:
        """An item known to be in the log at `seq` without reading it (the user message
        that queued this turn): held at once when it directly follows what the view
        holds, so the turn's first step reads nothing of the log; otherwise the next
        `refresh` reads it with whatever else the log gained."""
        if self.view.whole and seq == self.view.last_seq + 1:
            self.view.appended(seq, payload)

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
            self.steer_pending = False
            return
        self.cancel_requested = probe.cancel_requested
        self.interrupt_requested = probe.interrupt_requested
        self.steer_pending = probe.steer_pending
        self.reminder = probe.reminder
        if probe.segment != self.segment_no or probe.last_seq > self.view.last_seq:

            async def catch_up(db: AsyncSession) -> None:
                lineage = probe.lineage if probe.lineage_read else UNREAD
                rebuilt = await self.view.catch_up(
                    db, probe.segment, probe.last_seq, stored_lineage=lineage
                )
                if rebuilt is not None and self.checkpoint_every is not None:
                    self.checkpoint = checkpoint_of(rebuilt, self.checkpoint_every)
                    if self.checkpoint is not None:  # owed by this job now
                        self.view.checkpoint_kept()

            await self.database.read_statements(catch_up)

    def appended(self, seq: int, payload: ItemPayload, *, tasks_applied: bool = False) -> None:
        """Keep the view current with an item this job just wrote at `seq`."""
        self.view.appended(seq, payload, tasks_applied=tasks_applied)

    def invalidate(self) -> None:
        """Forget everything read; the next `refresh` reads the segment and tasks whole."""
        self.view.invalidate()
