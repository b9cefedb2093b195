"""TaskCreate / TaskUpdate / TaskList / TaskGet, offered to every session by default.

The tools hold no state: writes go through the gateway, which applies the operation
to the job's task list (rebuilt from the log) and records the result in one
transaction that checks the log has not moved meanwhile, so the result the model
reads is exactly the effect the log holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.domain.tasks import TaskCreateArgs, TaskUpdateArgs
from app.engine.tools import TaskGateway, Tool, ToolContext, ToolError, ToolOutput

TASK_TOOL_NAMES = ("TaskCreate", "TaskUpdate", "TaskList", "TaskGet")


class TaskListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskGetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    taskid: int = Field(ge=1)


def _gateway(ctx: ToolContext) -> TaskGateway:
    if ctx.tasks is None:
        raise ToolError("the task list is not available here")
    return ctx.tasks


async def _create(ctx: ToolContext, args: TaskCreateArgs) -> ToolOutput:
    return await _gateway(ctx).write(
        ctx.tool_use_id or "", "TaskCreate", args.model_dump(), ctx.result_tokens
    )


async def _update(ctx: ToolContext, args: TaskUpdateArgs) -> ToolOutput:
    return await _gateway(ctx).write(
        ctx.tool_use_id or "", "TaskUpdate", args.model_dump(exclude_none=True), ctx.result_tokens
    )


async def _list(ctx: ToolContext, args: TaskListArgs) -> str:
    return await _gateway(ctx).read(None)


async def _get(ctx: ToolContext, args: TaskGetArgs) -> str:
    return await _gateway(ctx).read(args.taskid)


def task_tools() -> list[Tool[Any]]:
    return [
        Tool(
            "TaskCreate",
            "Add a task to your task list. It starts as pending; its taskid is assigned "
            "for you. Use the list to plan multi-step work and keep it current.",
            TaskCreateArgs,
            _create,
        ),
        Tool(
            "TaskUpdate",
            "Change a task's status (pending, inprogress, completed, deleted), subject or "
            "description; give the taskid and at least one field. Deleting is status=deleted.",
            TaskUpdateArgs,
            _update,
        ),
        Tool(
            "TaskList",
            "Every task of this session with taskid, status, subject and description, "
            "completed and deleted ones included.",
            TaskListArgs,
            _list,
            read_on="TaskGet shows one task in full.",
            read_only=True,
        ),
        Tool("TaskGet", "One task by taskid.", TaskGetArgs, _get, read_only=True),
    ]
