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

A REST write also leaves the store it made in the process's `TASK_STORES` cache, once
it committed, as of the `seq` of the item it appended. The next REST write of the session
in this process takes it when the log still ends there (its `seq` allocation says so), and
reads and replays nothing; any other write of the session in between (the agent's tools,
another process) moved the log's end, so the store is rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches
from app.db.nul import has_nul
from app.db.repositories.items import ItemRecord, ItemRepository
from app.db.repositories.task_checkpoints import CheckpointRow, TaskCheckpointRepository
from app.db.types import utcnow
from app.domain.errors import InvalidInput, NotFound
from app.domain.items import ItemPayload, Origin, TaskEvent, ToolResult, load_payload
from app.domain.tasks import (
    TASK_WRITE_TOOLS,
    Task,
    TaskError,
    TaskOp,
    TaskStore,
    UnknownTask,
    replay,
)
from app.services import webhooks
from app.services.items import add_item, reserve_item
from app.services.sessions import check_session

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


async def rebuild(db: AsyncSession, session_id: str) -> Rebuilt:
    """The session's store: its checkpoint, and the task items after it replayed."""
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


async def load_store(db: AsyncSession, session_id: str) -> TaskStore:
    return (await rebuild(db, session_id)).store


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
async def list_tasks(
    db: AsyncSession, tenant: str, session_id: str, status: str | None = None
) -> list[Task]:
    await check_session(db, tenant, session_id)
    tasks = (await load_store(db, session_id)).all()
    return [t for t in tasks if status is None or t.status == status]


async def get_task(db: AsyncSession, tenant: str, session_id: str, taskid: int) -> Task:
    await check_session(db, tenant, session_id)
    try:
        return (await load_store(db, session_id)).get(taskid)
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
    rebuilt = _kept_store(db, session_id, slot.seq - 1) or await rebuild(db, session_id)
    if (due := checkpoint_of(rebuilt, checkpoint_every)) is not None:
        await keep_checkpoint(db, session_id, due)
        rebuilt = replace(rebuilt, replayed=0)
    store = rebuilt.store
    # the operation and its item carry the same moment, so the task answered here is
    # exactly what replaying the log will give, timestamps included
    now = utcnow()
    try:
        task = store.apply(TaskOp(op, args, now))
    except UnknownTask as exc:
        raise NotFound(str(exc), resource="task") from exc
    except (TaskError, ValidationError) as exc:
        raise InvalidInput(str(exc)) from exc
    event = TaskEvent(op=op, input=args, taskid=task.taskid)
    await add_item(db, session_id, slot, event, Origin.api, at=now)
    if not has_nul(args):  # PostgreSQL stores U+FFFD for it: only a replay gives that store
        made = Rebuilt(store, slot.seq, rebuilt.ops + 1, rebuilt.replayed + 1)
        caches.keep(db, caches.TASK_STORES, session_id, made)
    await webhooks.task_updated(db, tenant, session_id, task, op=op, origin="api")
    return task


def _kept_store(db: AsyncSession, session_id: str, log_end: int) -> Rebuilt | None:
    """The store an earlier REST write of this process left, if the log still ends at
    its item; taken, so no other write changes it meanwhile."""
    kept: Rebuilt | None = caches.take(db, caches.TASK_STORES, session_id)
    return kept if kept is not None and kept.seq == log_end else None
