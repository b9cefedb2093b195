"""Task use cases over the log: the store is replayed, changes are appended.

A write locks the session, replays, applies and appends in one transaction, so
concurrent writers (the agent's tools, REST clients) are serialized and every
effect is exactly the operation the log records.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job
from app.db.repositories.items import ItemRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import InvalidInput, NotFound
from app.domain.items import Origin, TaskEvent, ToolResult, load_payload
from app.domain.tasks import (
    TASK_WRITE_TOOLS,
    Task,
    TaskError,
    TaskOp,
    TaskStore,
    UnknownTask,
    render_summary,
    render_task,
    render_task_list,
    replay,
)
from app.services import webhooks
from app.services.events import record_event
from app.services.items import append_item
from app.services.live import LiveHub
from app.services.sessions import get_session
from app.tools.registry import ToolError, ToolOutput


async def task_ops(db: AsyncSession, session_id: str) -> list[TaskOp]:
    """The session's task operations in log order: REST events and successful tool calls."""
    ops: list[TaskOp] = []
    for row in await ItemRepository(db).by_tool_names(session_id, sorted(TASK_WRITE_TOOLS)):
        payload = load_payload(row.kind, row.payload)
        if isinstance(payload, TaskEvent):
            ops.append(TaskOp(payload.op, payload.input, row.created_at))
        elif isinstance(payload, ToolResult) and not payload.is_error and payload.input is not None:
            ops.append(TaskOp(payload.name or "", payload.input, row.created_at))
    return ops


async def load_store(db: AsyncSession, session_id: str) -> TaskStore:
    return replay(await task_ops(db, session_id))


async def _locked_store(db: AsyncSession, session_id: str) -> TaskStore:
    await SessionRepository(db).lock(session_id)
    return await load_store(db, session_id)


# --- REST -------------------------------------------------------------------
async def list_tasks(
    db: AsyncSession, tenant: str, session_id: str, status: str | None = None
) -> list[Task]:
    await get_session(db, tenant, session_id)
    tasks = (await load_store(db, session_id)).all()
    return [t for t in tasks if status is None or t.status == status]


async def get_task(db: AsyncSession, tenant: str, session_id: str, taskid: int) -> Task:
    await get_session(db, tenant, session_id)
    try:
        return (await load_store(db, session_id)).get(taskid)
    except UnknownTask as exc:
        raise NotFound(str(exc), resource="task") from exc


async def change_task(
    db: AsyncSession, tenant: str, session_id: str, op: str, args: dict[str, Any]
) -> Task:
    """A REST create or update: recorded as a task event (origin api) that replay applies."""
    await get_session(db, tenant, session_id)
    store = await _locked_store(db, session_id)
    try:
        task = store.apply(TaskOp(op, args))
    except UnknownTask as exc:
        raise NotFound(str(exc), resource="task") from exc
    except (TaskError, ValidationError) as exc:
        raise InvalidInput(str(exc)) from exc
    event = TaskEvent(op=op, input=args, taskid=task.taskid)
    await append_item(db, session_id, event, Origin.api)
    await record_event(
        db, session_id, "task.updated", {"taskid": task.taskid, "op": op, "origin": "api"}
    )
    await webhooks.task_updated(db, tenant, session_id, task, op=op, origin="api")
    # Answer with what replay now says, timestamps included: one truth, not two.
    return (await load_store(db, session_id)).get(task.taskid)


# --- the task tools' gateway ----------------------------------------------------
class LogTaskGateway:
    """What TaskCreate/TaskUpdate/TaskList/TaskGet do, for one running job."""

    def __init__(self, database: Database, hub: LiveHub, job: Job) -> None:
        self.database = database
        self.hub = hub
        self.job = job

    async def write(self, tool_use_id: str, op: str, args: dict[str, Any]) -> ToolOutput:
        job = self.job
        async with self.database.session(write=True) as db:
            store = await _locked_store(db, job.session_id)
            try:
                task = store.apply(TaskOp(op, args))
            except (TaskError, ValidationError) as exc:
                content, is_error = str(exc), True
            else:
                verb = "Created" if op == "TaskCreate" else "Updated"
                content = (
                    f"{verb} task {task.taskid}:\n{render_task(task)}\n\n{render_summary(store)}"
                )
                is_error = False
            result = ToolResult(
                tool_use_id=tool_use_id, content=content, is_error=is_error, name=op, input=args
            )
            await append_item(
                db, job.session_id, result, Origin.system, turn=job.turn, job_id=job.id
            )
            if not is_error:
                await record_event(
                    db,
                    job.session_id,
                    "task.updated",
                    {"taskid": task.taskid, "op": op, "origin": "llm"},
                    job_id=job.id,
                )
                await webhooks.task_updated(
                    db, job.tenant, job.session_id, task, op=op, origin="llm", job_id=job.id
                )
        self.hub.committed(job.session_id, job.id)
        return ToolOutput(content, is_error, recorded=True)

    async def read(self, taskid: int | None) -> str:
        async with self.database.session(write=False) as db:
            store = await load_store(db, self.job.session_id)
        if taskid is None:
            return render_task_list(store)
        try:
            return render_task(store.get(taskid))
        except UnknownTask as exc:
            raise ToolError(str(exc)) from exc
