from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api.deps import (
    INT64_MAX,
    CurrentTenant,
    DatabaseDep,
    IdempotencyDep,
    SessionDep,
    SettingsDep,
    write_once,
)
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.tasks import Task, TaskCreate, TaskList, TaskPatch
from app.domain.tasks import TaskStatus
from app.services import tasks as service

router = APIRouter(
    prefix="/sessions/{session_id}/tasks", tags=["tasks"], responses=problem_responses(401, 503)
)

TaskId = Annotated[int, Path(ge=1, le=INT64_MAX, description="The task's id in its session.")]

RECORDED = (
    " The change is recorded in the session's log as a task event (origin `api`), "
    "replayed like the agent's own TaskCreate/TaskUpdate calls, and shown to the agent "
    "as a short note in its next request."
)


@router.post(
    "",
    status_code=201,
    response_model=Task,
    name="create",
    summary="Add a task to the session's task list",
    description="The task starts `pending`; its `taskid` is the next one." + RECORDED,
    responses=problem_responses(404, 413, 422),
)
async def create_task(
    session_id: SessionId,
    body: TaskCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    idempotency: IdempotencyDep,
    settings: SettingsDep,
) -> object:
    args = body.model_dump()
    every = settings.task_checkpoint_ops
    return await write_once(
        database,
        idempotency,
        201,
        lambda db: service.change_task(
            db, tenant, session_id, "TaskCreate", args, checkpoint_every=every
        ),
        location=lambda task: f"/sessions/{session_id}/tasks/{task['taskid']}",
    )


@router.get(
    "",
    name="list",
    summary="The session's tasks, every status, in taskid order",
    description=(
        "The task list the agent and the session's users share; `status` keeps "
        "only the tasks in that status (a deleted task stays listed as "
        "`deleted`)."
    ),
    responses=problem_responses(404, 422),
)
async def list_tasks(
    session_id: SessionId, db: SessionDep, tenant: CurrentTenant, status: TaskStatus | None = None
) -> TaskList:
    return TaskList(data=await service.list_tasks(db, tenant, session_id, status))


@router.get(
    "/{taskid}",
    name="get",
    summary="One task",
    description=(
        "A task by its `taskid` (numbered from 1 within the session); an unknown one is a 404."
    ),
    responses=problem_responses(404, 422),
)
async def get_task(
    session_id: SessionId, taskid: TaskId, db: SessionDep, tenant: CurrentTenant
) -> Task:
    return await service.get_task(db, tenant, session_id, taskid)


@router.patch(
    "/{taskid}",
    name="update",
    summary="Change a task's status, subject or description",
    description="`status=deleted` deletes; the task stays in the list." + RECORDED,
    responses=problem_responses(404, 413, 422),
)
async def update_task(
    session_id: SessionId,
    taskid: TaskId,
    body: TaskPatch,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> Task:
    args = {"taskid": taskid, **body.model_dump(exclude_none=True)}
    every = settings.task_checkpoint_ops
    return await database.write(
        lambda db: service.change_task(
            db, tenant, session_id, "TaskUpdate", args, checkpoint_every=every
        )
    )
