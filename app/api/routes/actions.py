"""A job's pending actions: the tool calls it waits on people for, and their decisions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import (
    ActionCursor,
    CurrentTenant,
    DatabaseDep,
    IdempotencyDep,
    PageLimit,
    RuntimeDep,
    SessionDep,
    write_once,
)
from app.api.errors import problem_responses
from app.api.routes.jobs import JobId
from app.api.schemas.actions import (
    ActionBatch,
    ActionList,
    ActionPage,
    ActionPublic,
    ActionResolve,
)
from app.domain.actions import ActionStatus
from app.services import actions as service
from app.wiring import Runtime

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=problem_responses(401, 503))
tenant_router = APIRouter(prefix="/actions", tags=["jobs"], responses=problem_responses(401, 503))

ActionId = Annotated[str, Path(max_length=40, description="An action id (`act_…`).")]

_RESOLVING = (
    "The same decision sent again answers 200 with the same action and changes nothing "
    "(so does a retry with the same `Idempotency-Key`); another decision on a resolved "
    "action is a 409, and so is any on an action that expired or whose job ended. Once "
    "no action of the job is pending, the job is queued again and its turn goes on: "
    "allowed and edited calls run, denied ones answer the model an error with the reason, "
    "answered ones the given content."
)


def _context(runtime: Runtime) -> service.ResolveContext:
    return service.ResolveContext(runtime.tools, runtime.settings.tool_policy_max_rules)


@router.get(
    "/{job_id}/actions",
    name="actions",
    summary="A job's actions: the tool calls it waited or waits on people for",
    description="Oldest first, pending and resolved alike; `required_action` on the job "
    "lists the pending ones.",
    responses=problem_responses(404, 422),
)
async def list_actions(job_id: JobId, db: SessionDep, tenant: CurrentTenant) -> ActionList:
    rows = await service.list_actions(db, tenant, job_id)
    return ActionList(data=[ActionPublic.of(row) for row in rows])


@router.post(
    "/{job_id}/actions/{action_id}",
    response_model=ActionPublic,
    name="resolve_action",
    summary="Decide on one pending action: allow, deny, edit or respond",
    description=_RESOLVING,
    responses=problem_responses(404, 409, 413, 422),
)
async def resolve_action(
    job_id: JobId,
    action_id: ActionId,
    body: ActionResolve,
    database: DatabaseDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
    idempotency: IdempotencyDep,
) -> object:
    async def work(db: AsyncSession) -> ActionPublic:
        rows = await service.resolve_actions(
            db, tenant, job_id, [body.choice(action_id)], _context(runtime)
        )
        return ActionPublic.of(rows[0])

    return await write_once(database, idempotency, 200, work)


@router.post(
    "/{job_id}/actions",
    response_model=ActionList,
    name="resolve_actions",
    summary="Decide on several pending actions at once",
    description="All or none: one refused decision (404, 409, 422 naming "
    "`actions[i]…`) resolves nothing. " + _RESOLVING,
    responses=problem_responses(404, 409, 413, 422),
)
async def resolve_actions(
    job_id: JobId,
    body: ActionBatch,
    database: DatabaseDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
    idempotency: IdempotencyDep,
) -> object:
    choices = [item.choice(item.id) for item in body.actions]

    async def work(db: AsyncSession) -> ActionList:
        rows = await service.resolve_actions(db, tenant, job_id, choices, _context(runtime))
        return ActionList(data=[ActionPublic.of(row) for row in rows])

    return await write_once(database, idempotency, 200, work)


@tenant_router.get(
    "",
    name="list_all_actions",
    summary="List the tenant's actions across its jobs, newest first",
    description="`status=pending` lists every tool call that waits for a person now, "
    "whichever job or session it belongs to (each names its `job_id` and `session_id`); "
    "resolve one with `POST /jobs/{job_id}/actions/{action_id}`.",
    responses=problem_responses(422),
)
async def list_all_actions(
    db: SessionDep,
    tenant: CurrentTenant,
    limit: PageLimit,
    after: ActionCursor = None,
    status: Annotated[
        ActionStatus | None, Query(description="Only the actions in this status.")
    ] = None,
) -> ActionPage:
    page = await service.list_tenant_actions(db, tenant, limit=limit, after=after, status=status)
    return ActionPage(
        data=[ActionPublic.of(row) for row in page.data], next_cursor=page.next_cursor
    )
