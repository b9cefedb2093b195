from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import (
    CurrentTenant,
    DatabaseDep,
    IdempotencyDep,
    PageLimit,
    RuntimeDep,
    SessionCursor,
    SessionDep,
    SettingsDep,
    policy_bounds,
    write_once,
)
from app.api.errors import problem_responses
from app.api.schemas.sessions import (
    SessionCreate,
    SessionList,
    SessionPublic,
    SessionStatus,
    SessionUpdate,
)
from app.services import session_deletion as deletion
from app.services import sessions as service
from app.services.mcp_attach import Attachment, check_session_attachments

router = APIRouter(prefix="/sessions", tags=["sessions"], responses=problem_responses(401, 503))

SessionId = Annotated[str, Path(max_length=40, description="A session id (`ses_…`).")]


@router.post(
    "",
    status_code=201,
    response_model=SessionPublic,
    name="create",
    summary="Create a session",
    description=(
        "Answers 201 with the session and its `Location`. Its `tools`, "
        "`client_tools` and `tool_policy` are checked when written (422 naming "
        "the field); each `mcp` server is listed once, so an attachment whose "
        "tools collide or are too many is a 422 and a server that cannot list "
        "them a 502. A retry with the same `Idempotency-Key` gets the first "
        "answer."
    ),
    responses=problem_responses(413, 422, 502),
)
async def create_session(
    body: SessionCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
    idempotency: IdempotencyDep,
) -> object:
    mcp = await check_session_attachments(
        database, runtime.settings, tenant, [Attachment.of(a.model_dump()) for a in body.mcp]
    )

    async def work(db: AsyncSession) -> SessionPublic:
        row = await service.create_session(
            db,
            tenant,
            title=body.title,
            system_prompt=body.system_prompt,
            model=body.model,
            metadata=body.metadata,
            tools=body.tools,
            known_tools=runtime.tools.names,
            mcp=mcp,
            tool_policy=body.tool_policy,
            policy_bounds=policy_bounds(runtime),
            client_tools=body.client_tools,
            client_tools_max=runtime.settings.client_tools_max,
            continues_from=body.continues_from,
        )
        return SessionPublic.of(row, SessionStatus.idle)  # nothing runs in it yet

    return await write_once(
        database, idempotency, 201, work, location=lambda body: f"/sessions/{body['id']}"
    )


@router.get(
    "",
    name="list",
    summary="List sessions, newest first",
    description="`q` keeps the sessions whose title contains it (any case); `status` those "
    "that are `idle`, `running` or `waiting` (see the session's `status`). Both apply "
    "before paging, so every page is full until the last.",
    responses=problem_responses(422),
)
async def list_sessions(
    db: SessionDep,
    tenant: CurrentTenant,
    limit: PageLimit,
    after: SessionCursor = None,
    q: Annotated[
        str | None, Query(max_length=500, description="Part of the title, any case.")
    ] = None,
    status: SessionStatus | None = None,
) -> SessionList:
    page = await service.list_sessions(db, tenant, limit=limit, after=after, title=q, status=status)
    statuses = await service.statuses_of(db, page.data)
    return SessionList(
        data=[SessionPublic.of(r, statuses[r.id]) for r in page.data],
        next_cursor=page.next_cursor,
    )


@router.get(
    "/{session_id}",
    name="get",
    summary="Get a session",
    description=(
        "The session as created or last changed, with its current `status` (from "
        "its jobs: idle, running or waiting). Another tenant's session is a 404."
    ),
    responses=problem_responses(404, 422),
)
async def get_session(
    session_id: SessionId, db: SessionDep, tenant: CurrentTenant
) -> SessionPublic:
    row = await service.get_session(db, tenant, session_id)
    return SessionPublic.of(row, await service.status_of(db, row))


@router.patch(
    "/{session_id}",
    name="update",
    summary="Change a session's title, metadata, tools or tool policy",
    description=(
        "Only the fields sent change (a sent `null` clears a field that may be "
        "null); they are checked as on create."
    ),
    responses=problem_responses(404, 413, 422, 502),
)
async def update_session(
    session_id: SessionId,
    body: SessionUpdate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
) -> SessionPublic:
    mcp = await check_session_attachments(
        database, runtime.settings, tenant, [Attachment.of(a.model_dump()) for a in body.mcp]
    )
    changes = service.SessionChanges(
        sent=frozenset(body.model_fields_set),
        title=body.title,
        metadata=body.metadata,
        tools=body.tools,
        tool_policy=body.tool_policy,
        mcp=mcp,
        client_tools=body.client_tools,
        client_tools_max=runtime.settings.client_tools_max,
    )

    async def work(db: AsyncSession) -> SessionPublic:
        row = await service.update_session(
            db, tenant, session_id, changes, runtime.tools.names, policy_bounds(runtime)
        )
        return SessionPublic.of(row, await service.status_of(db, row))

    return await database.write(work)


@router.delete(
    "/{session_id}",
    status_code=204,
    name="delete",
    summary="Delete a session and everything in it",
    description=(
        "Cancels the session's jobs (a running one stops at once in its runner's process, "
        "else at its next step) and removes its event log, tasks, memory (L1/L2/L3), "
        "events, job comments and workspace files, and the sessions of its subagents. "
        "Sessions that continued from it or were merged into it stay, unlinked from it. "
        "204; the session is 404 afterwards. A session whose forks read its log is a 409 "
        "(`session-has-forks`, naming them) until they are deleted."
    ),
    responses=problem_responses(404, 409, 422),
)
async def delete_session(
    session_id: SessionId, database: DatabaseDep, settings: SettingsDep, tenant: CurrentTenant
) -> Response:
    job_ids = await database.write(lambda db: deletion.delete_session(db, tenant, session_id))
    await asyncio.to_thread(deletion.remove_workspaces, settings, tenant, job_ids)
    return Response(status_code=204)
