"""Task use cases over the log: the store is replayed, changes are appended.

A write locks the session, replays, applies and appends in one transaction, so
concurrent writers (the agent's tools, REST clients) are serialized and every
effect is exactly the operation the log records.

A rebuild starts from the session's checkpoint (`TaskCheckpoint`: the store as
replaying the log up to one `seq` gave it) and replays only the task items after it.
A write transaction whose rebuild replayed more than `task_checkpoint_ops` operations
leaves a new checkpoint, so no rebuild replays much more than that, however long the
log. The log stays the truth: a checkpoint is what replaying it gives, and one that
cannot be read is ignored (the log is replayed whole).

The REST routes answer from the session's view of its log (`app.services.session_view`),
which the process's chat turns and REST writes hand to each other: a write whose `seq`
allocation finds the log still ending where the view does reads and replays nothing; one
that finds it moved reads only the task items after the view's end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.nul import has_nul
from app.db.repositories.items import ItemRecord, ItemRepository
from app.db.repositories.sessions import SessionRepository
from app.db.repositories.task_checkpoints import CheckpointRow, TaskCheckpointRepository
from app.db.types import utcnow
from app.domain.errors import InvalidInput, NotFound
from app.domain.items import (
    REWIND_NAME,
    ItemPayload,
    Origin,
    TaskEvent,
    ToolResult,
    load_payload,
)
from app.domain.lineage import Lineage, Span
from app.domain.tasks import (
    TASK_WRITE_TOOLS,
    Task,
    TaskError,
    TaskOp,
    TaskStore,
    UnknownTask,
    replay,
)
from app.services import session_view as views
from app.services import webhooks
from app.services.items import UNREAD, StoredLineage, add_item, read_lineage, reserve_item
from app.services.sessions import session_from

T = TypeVar("T")

_TOOL_RESULT_FIELDS = frozenset(ToolResult.model_fields) - {"kind"}
_TASK_EVENT_FIELDS = frozenset(TaskEvent.model_fields) - {"kind"}


def _plain_tool_result(kind: str, data: dict[str, Any]) -> bool:
    """A tool result whose fields have exactly the types `ToolResult` declares, with text
    content (what the task tools write): the model would accept it unchanged."""
    return (
        kind == "tool_result"
        and data.keys() <= _TOOL_RESULT_FIELDS
        and isinstance(data.get("tool_use_id"), str)
        and isinstance(data.get("content"), str)
        and type(data.get("is_error", False)) is bool
        and isinstance(data.get("name"), str | None)
        and isinstance(data.get("input"), dict | None)
    )


def _plain_task_event(kind: str, data: dict[str, Any]) -> bool:
    """A task event whose fields have exactly the types `TaskEvent` declares."""
    return (
        kind == "task_event"
        and data.keys() <= _TASK_EVENT_FIELDS
        and isinstance(op := data.get("op"), str)
        and op in TASK_WRITE_TOOLS
        and isinstance(data.get("input"), dict)
        and type(data.get("taskid")) is int
    )


def task_op_of(kind: str, data: dict[str, Any], at: datetime) -> TaskOp | None:
    """The operation an item records: a REST event's, or a successful task tool call's.

    A rebuild reads every task item of the session on every request, and validating each
    payload with its pydantic model (content included) is the largest cost per row. A
    payload already of the exact declared shape (every one Strata writes) is read directly;
    anything else goes through the model, so both paths accept and refuse alike.
    """
    if _plain_tool_result(kind, data):
        if data.get("is_error", False) or data.get("input") is None:
            return None
        return TaskOp(data.get("name") or "", data["input"], at)
    if _plain_task_event(kind, data):
        return TaskOp(data["op"], data["input"], at)
    payload = load_payload(kind, data)
    if isinstance(payload, TaskEvent):
        return TaskOp(payload.op, payload.input, at)
    if isinstance(payload, ToolResult) and not payload.is_error and payload.input is not None:
        return TaskOp(payload.name or "", payload.input, at)
    return None


def task_op_of_payload(payload: ItemPayload) -> TaskOp | None:
    """The task operation an item records, if any (as `task_op_of`, for a model)."""
    if isinstance(payload, TaskEvent):
        return TaskOp(payload.op, payload.input)
    if (
        isinstance(payload, ToolResult)
        and payload.name in TASK_WRITE_TOOLS
        and not payload.is_error
        and payload.input is not None
    ):
        return TaskOp(payload.name, payload.input)
    return None


async def task_ops(db: AsyncSession, session_id: str, *, after_seq: int = 0) -> list[TaskOp]:
    """The session's task operations in log order (after `after_seq`): REST events and
    successful tool calls."""
    rows = await _task_items(db, session_id, after_seq)
    ops = (task_op_of(row.kind, row.payload, row.created_at) for row in rows)
    return [op for op in ops if op is not None]


async def task_ops_since(db: AsyncSession, session_id: str, after_seq: int) -> list[TaskOp] | None:
    """`task_ops` after `after_seq` for a reader holding the list up to there; None when
    a rewind came after it: the list is then not the one held plus these, and must be
    replayed anew (`rebuild`)."""
    rows = await ItemRepository(db).by_tool_names(session_id, _TASK_OR_REWIND, after_seq=after_seq)
    if any(row.kind == "rewind" for row in rows):
        return None
    ops = (task_op_of(row.kind, row.payload, row.created_at) for row in rows)
    return [op for op in ops if op is not None]


_TASK_OR_REWIND = sorted((*TASK_WRITE_TOOLS, REWIND_NAME))


async def _task_items(db: AsyncSession, session_id: str, after_seq: int) -> list[ItemRecord]:
    return await ItemRepository(db).by_tool_names(
        session_id, sorted(TASK_WRITE_TOOLS), after_seq=after_seq
    )


@dataclass(frozen=True)
class Rebuilt:
    """A store as of the log's `seq`, holding `ops` task items; `replayed` of them are
    after the session's checkpoint (the others came from it)."""

    store: TaskStore
    seq: int
    ops: int
    replayed: int
    lineage: Lineage | None = None


async def rebuild(
    db: AsyncSession, session_id: str, stored_lineage: StoredLineage = UNREAD
) -> Rebuilt:
    """The session's store: its checkpoint, and the task items after it replayed; for a
    forked or rewound session, the task items its lineage reads, replayed."""
    if (lineage := await read_lineage(db, session_id, stored_lineage)) is not None:
        return await _rebuild_lineage(db, lineage)
    store, seq, ops = TaskStore(), 0, 0
    names = sorted(TASK_WRITE_TOOLS)
    kept, items = await TaskCheckpointRepository(db).with_items(session_id, names)
    if kept is not None:
        if (restored := TaskStore.restore(kept.state)) is not None:
            store, seq, ops = restored, kept.seq, kept.ops
        else:  # a checkpoint this version cannot read: the whole log, as without one
            items = await _task_items(db, session_id, 0)
    ops_after = (task_op_of(row.kind, row.payload, row.created_at) for row in items)
    replay((op for op in ops_after if op is not None), store)
    last = items[-1].seq if items else seq
    return Rebuilt(store, last, ops + len(items), len(items))


async def _rebuild_lineage(db: AsyncSession, lineage: Lineage) -> Rebuilt:
    """Replay of the task items of the spans the session reads (its checkpoints, which do
    not know which items a rewind reverted, are not read; none is left: `replayed` 0)."""
    items = await _span_task_items(db, lineage.spans)
    store = TaskStore()
    ops_of = (task_op_of(row.kind, row.payload, row.created_at) for row in items)
    replay((op for op in ops_of if op is not None), store)
    return Rebuilt(store, items[-1].seq if items else 0, len(items), 0, lineage)


async def _span_task_items(db: AsyncSession, spans: Sequence[Span]) -> list[ItemRecord]:
    repo, names = ItemRepository(db), sorted(TASK_WRITE_TOOLS)
    items: list[ItemRecord] = []
    for span in spans:
        found = await repo.by_tool_names(span.source, names, after_seq=span.after)
        items.extend(row for row in found if span.upto is None or row.seq <= span.upto)
    return items


async def replay_spans(db: AsyncSession, spans: Sequence[Span]) -> TaskStore:
    """The task list a log made of `spans` replays to (a rewind's preview)."""
    store = TaskStore()
    ops_of = (
        task_op_of(r.kind, r.payload, r.created_at) for r in await _span_task_items(db, spans)
    )
    replay((op for op in ops_of if op is not None), store)
    return store


async def load_store(
    db: AsyncSession, session_id: str, stored_lineage: StoredLineage = UNREAD
) -> TaskStore:
    """The session's task list; `stored_lineage`: the `lineage` of the session row the
    caller read, when it read it."""
    return (await rebuild(db, session_id, stored_lineage)).store


def checkpoint_of(rebuilt: Rebuilt, every: int) -> CheckpointRow | None:
    """The checkpoint a rebuild that replayed more than `every` operations leaves, taken
    now (the store may change in memory before it is written); None when it is not due."""
    if rebuilt.replayed <= every:
        return None
    return CheckpointRow(rebuilt.seq, rebuilt.ops, rebuilt.store.snapshot())


async def keep_checkpoint(db: AsyncSession, session_id: str, checkpoint: CheckpointRow) -> None:
    """In a write transaction that holds the session's row (it appended, or locked it)."""
    await TaskCheckpointRepository(db).keep(session_id, checkpoint)


# --- REST -------------------------------------------------------------------
async def _rest_read(
    db: AsyncSession, tenant: str, session_id: str, read: Callable[[TaskStore], T]
) -> T:
    """`read` of the session's list: of its view's when that is the log's (the session's
    row, which the tenant check reads, says where the log ends), else of a replay. The
    view goes back as it was taken: a read unit may not read one snapshot, so only a
    writer or a job's snapshot read catches it up."""
    rows = await SessionRepository(db).session_row(session_id)
    session = session_from(rows, tenant, session_id)
    view = views.take_in(db, session_id)
    try:
        if view.valid_at(session.last_seq):
            return read(view.tasks)
    finally:
        views.give_back_in(db, view)
    return read(await load_store(db, session_id, session.lineage))


async def list_tasks(
    db: AsyncSession, tenant: str, session_id: str, status: str | None = None
) -> list[Task]:
    tasks = await _rest_read(db, tenant, session_id, TaskStore.all)
    return [t for t in tasks if status is None or t.status == status]


async def get_task(db: AsyncSession, tenant: str, session_id: str, taskid: int) -> Task:
    try:
        return await _rest_read(db, tenant, session_id, lambda store: store.get(taskid))
    except UnknownTask as exc:
        raise NotFound(str(exc), resource="task") from exc


async def change_task(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    op: str,
    args: dict[str, Any],
    *,
    checkpoint_every: int,
) -> Task:
    """A REST create or update: recorded as a task event (origin api) that replay applies.
    It counts as a task write for the reminder's timing (the agent reads of it in the
    task note the event becomes)."""
    slot = await reserve_item(db, tenant, session_id, wrote_tasks=True)
    view = views.take_in(db, session_id)  # given back once this unit committed
    if not view.valid_at(slot.seq - 1):
        await view.catch_up(db, slot.segment, slot.seq - 1, with_items=False)
    if view.replayed > checkpoint_every:
        checkpoint = CheckpointRow(view.last_seq, view.ops, view.tasks.snapshot())
        await keep_checkpoint(db, session_id, checkpoint)
        view.checkpoint_kept()
    # the operation and its item carry the same moment, so the task answered here is
    # exactly what replaying the log will give, timestamps included
    now = utcnow()
    try:
        task = view.tasks.apply(TaskOp(op, args, now))
    except UnknownTask as exc:
        raise NotFound(str(exc), resource="task") from exc
    except (TaskError, ValidationError) as exc:
        raise InvalidInput(str(exc)) from exc
    event = TaskEvent(op=op, input=args, taskid=task.taskid)
    await add_item(db, session_id, slot, event, Origin.api, at=now)
    view.appended(slot.seq, event, tasks_applied=True)
    if not has_nul(args):  # PostgreSQL stores U+FFFD for it: only a replay gives that list
        views.keep_when_committed(db, view)
    await webhooks.task_updated(db, tenant, session_id, task, op=op, origin="api")
    return task
