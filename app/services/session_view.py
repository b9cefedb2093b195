"""A session's log as far as this process has read it, and the one rule for trusting it.

A `SessionView` holds what was read of one session's log: where it ended (`last_seq`),
the current segment's items (when its reader needs them: a running job), the task list
replayed up to there, and the request messages built from those items. It is valid while
the log still ends at `last_seq`: every reader learns the log's end from a read it makes
anyway (a job's step probe or its turn's start, a REST write's `seq` allocation, a task
list's session check), and when the end moved it reads only what came after `last_seq`
(`catch_up`); a new segment (a compaction, a movement that starts fresh) reads the new
segment whole, and a view whose state may be off (a write failed half-way) is forgotten
(`invalidate`) and read again from the log.

The process keeps its views in one bounded holder (`app.db.caches.SESSION_VIEWS`, bounded
by `STRATA_JOB_SESSION_CACHE_SECONDS`, `_ENTRIES` and `_ITEMS`): the runner's chat turns,
the REST task routes and the console (a client of those routes) take a session's view
from it and give it back once what they wrote committed, so each starts where the last
one stopped. A view has one owner at a time: it is taken, not shared, and one that was
not given back (its unit rolled back, its job ended without committing) is simply read
again from the log by the next reader.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches
from app.db.caches import SESSION_VIEWS, Caches
from app.domain.items import ItemPayload
from app.domain.lineage import Lineage
from app.domain.tasks import TaskOp, TaskStore
from app.engine.requests import Conversation
from app.services import tasks as task_log
from app.services.items import UNREAD, StoredLineage, segment_tail


class SessionView:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        # the log's end as far as this view has read it (with `tasks_loaded`)
        self.last_seq = 0
        # the segment whose items `items` holds; None: no items held
        self.segment: int | None = None
        self.items: list[ItemPayload] = []
        self.tasks = TaskStore()
        self.tasks_loaded = False
        # which items the log is made of (read with the task list; a rewind, which
        # changes it, makes the task list be replayed anew)
        self.lineage: Lineage | None = None
        # task operations the list holds, and how many of them came after the session's
        # task checkpoint (a write that finds many leaves a new one)
        self.ops = 0
        self.replayed = 0
        self._conversation: Conversation | None = None

    def valid_at(self, log_end: int) -> bool:
        """The task list (and the items held) are the log's, which ends at `log_end`."""
        return self.tasks_loaded and self.last_seq == log_end

    @property
    def whole(self) -> bool:
        """Holds both the segment's items and the task list."""
        return self.tasks_loaded and self.segment is not None

    async def catch_up(
        self,
        db: AsyncSession,
        segment: int,
        log_end: int,
        *,
        with_items: bool = True,
        stored_lineage: StoredLineage = UNREAD,
    ) -> task_log.Rebuilt | None:
        """Read what the log, which ends at `log_end` in `segment`, gained after
        `last_seq`: the task operations and (`with_items`, or when items are held) the
        segment's items. In one snapshot. Returns the rebuild when the task list had to
        be replayed from the log (none was held)."""
        rebuilt = None
        ops = None
        if self.tasks_loaded:
            ops = await task_log.task_ops_since(db, self.session_id, self.last_seq)
            if ops is None:  # a rewind: the log is not the one read plus what came after
                self.invalidate()
        if not self.tasks_loaded:
            rebuilt = await task_log.rebuild(db, self.session_id, stored_lineage)
            self.tasks, self.tasks_loaded = rebuilt.store, True
            self.ops, self.replayed = rebuilt.ops, rebuilt.replayed
            self.lineage = rebuilt.lineage
            self._restart(None)
        else:
            for op in ops or ():
                self._apply(op)
        tail_end = 0
        if with_items or self.segment is not None:
            after = self.last_seq
            if segment != self.segment:
                self._restart(segment)
                after = 0
            tail = await segment_tail(db, self.session_id, segment, after, self.lineage)
            self.items.extend(payload for _, payload in tail)
            tail_end = tail[-1][0] if tail else 0
        self.last_seq = max(log_end, tail_end)
        return rebuilt

    def appended(self, seq: int, payload: ItemPayload, *, tasks_applied: bool = False) -> None:
        """An item its owner wrote at `seq`, committed (or known to be in the log); with
        `tasks_applied`, its task operation is in the list already."""
        if not self.tasks_loaded or seq != self.last_seq + 1:
            self.invalidate()  # someone else wrote in between: read it all again
            return
        if self.segment is not None:
            self.items.append(payload)
        self.last_seq = seq
        if tasks_applied:
            self.ops, self.replayed = self.ops + 1, self.replayed + 1
        elif (op := task_log.task_op_of_payload(payload)) is not None:
            self._apply(op)

    def applied(self) -> None:
        """Its owner applied one task operation to `tasks` itself (to be appended)."""
        self.ops, self.replayed = self.ops + 1, self.replayed + 1

    def checkpoint_kept(self) -> None:
        """A checkpoint of the list as it is was written: nothing replayed after it."""
        self.replayed = 0

    def invalidate(self) -> None:
        """Forget everything read; the next `catch_up` reads the segment and tasks whole."""
        self.last_seq = 0
        self.tasks, self.tasks_loaded = TaskStore(), False
        self.lineage = None
        self.ops = self.replayed = 0
        self._restart(None)

    def conversation(self, *, tools_offered: bool) -> Conversation:
        """The request messages built from `items`, growing with them: a turn's requests,
        and the session's next turns', build only the messages of new items."""
        held = self._conversation
        if held is None or held.tools_offered != tools_offered:
            held = self._conversation = Conversation(tools_offered=tools_offered)
        return held

    def _apply(self, op: TaskOp) -> None:
        self.tasks.apply_or_skip(op)
        self.ops, self.replayed = self.ops + 1, self.replayed + 1

    def _restart(self, segment: int | None) -> None:
        """Hold the items of `segment` from its start (None: hold none)."""
        self.segment, self.items = segment, []
        if self._conversation is not None:
            self._conversation.start_over()


# --- the holder -----------------------------------------------------------------
def take_view(held: Caches, session_id: str) -> SessionView:
    """The session's view from the holder, or a new one that has read nothing."""
    found = held[SESSION_VIEWS].take(session_id)
    return found if isinstance(found, SessionView) else SessionView(session_id)


def give_back(held: Caches, view: SessionView) -> None:
    """Back to the holder, for the session's next reader (one that read nothing: not)."""
    if view.tasks_loaded:
        cache = held[SESSION_VIEWS]
        cache.put(view.session_id, view, cache.stamp())


def take_in(db: AsyncSession, session_id: str) -> SessionView:
    """`take_view` from within a unit of work (a new view when `db` has no holder)."""
    found = caches.take(db, SESSION_VIEWS, session_id)
    return found if isinstance(found, SessionView) else SessionView(session_id)


def keep_when_committed(db: AsyncSession, view: SessionView) -> None:
    """Back to the holder once `db` commits (a rollback drops it: it may hold the
    unit's changes)."""
    caches.keep(db, SESSION_VIEWS, view.session_id, view)


def give_back_in(db: AsyncSession, view: SessionView) -> None:
    """Back to the holder at once, from a unit of work that changed nothing of it."""
    held = caches.caches_of(db)
    if held is not None:
        give_back(held, view)
