from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.deps import CurrentTenant, DatabaseDep, RuntimeDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.jobs import JobId
from app.api.routes.sessions import SessionId
from app.api.schemas.items import item_public
from app.db.models import Job
from app.services.jobs import get_job
from app.services.sessions import get_session
from app.services.streams import StreamEvent, event_stream, parse_last_event_id
from app.settings import Settings
from app.wiring import Runtime

router = APIRouter(tags=["events"], responses=problem_responses(401, 503))

LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=100)]

STREAM_DESCRIPTION = (
    "Server-Sent Events: `item.appended` (data: the item), `job.status`, `usage`, and live "
    "`text.delta`, `tool.started`, `tool.finished`. Reconnect with `Last-Event-ID` to "
    "replay the durable events you missed."
)


def _sse(event: StreamEvent | None) -> ServerSentEvent:
    if event is None:
        return ServerSentEvent(comment="keep-alive")
    data: dict[str, Any] = dict(event.data)
    if "item" in data:
        data["item"] = item_public(data["item"]).model_dump(mode="json")
    return ServerSentEvent(id=event.id, event=event.type, data=data)


async def _stream(
    runtime: Runtime,
    settings: Settings,
    session_id: str,
    job_id: str | None,
    last_event_id: str | None,
) -> AsyncIterator[ServerSentEvent]:
    """A session's events, or one job's until it ends."""
    async for event in event_stream(
        runtime.database,
        runtime.hub,
        session_id=session_id,
        job_id=job_id,
        last_event_id=parse_last_event_id(last_event_id),
        poll_seconds=settings.worker_poll_seconds,
        keepalive_seconds=settings.sse_keepalive_seconds,
        until_job_ends=job_id is not None,
    ):
        yield _sse(event)


# The look-ups are dependencies, so an unknown id is a 404 before the stream starts:
# in the generator's body it would fail after the 200 has been sent.
async def _existing_session(
    session_id: SessionId, database: DatabaseDep, tenant: CurrentTenant
) -> str:
    async with database.read() as db:
        await get_session(db, tenant, session_id)
    return session_id


async def _existing_job(job_id: JobId, database: DatabaseDep, tenant: CurrentTenant) -> Job:
    async with database.read() as db:
        return await get_job(db, tenant, job_id)


@router.get(
    "/sessions/{session_id}/events",
    name="session_stream",
    summary="Stream a session's events",
    description=STREAM_DESCRIPTION,
    response_class=EventSourceResponse,
    responses=problem_responses(404, 422),
)
async def session_events(
    session_id: Annotated[str, Depends(_existing_session)],
    runtime: RuntimeDep,
    settings: SettingsDep,
    last_event_id: LastEventId = None,
) -> AsyncIterator[ServerSentEvent]:
    async for event in _stream(runtime, settings, session_id, None, last_event_id):
        yield event


@router.get(
    "/jobs/{job_id}/events",
    name="job_stream",
    summary="Stream a job's events until it ends",
    description=STREAM_DESCRIPTION,
    response_class=EventSourceResponse,
    responses=problem_responses(404, 422),
)
async def job_events(
    job: Annotated[Job, Depends(_existing_job)],
    runtime: RuntimeDep,
    settings: SettingsDep,
    last_event_id: LastEventId = None,
) -> AsyncIterator[ServerSentEvent]:
    async for event in _stream(runtime, settings, job.session_id, job.id, last_event_id):
        yield event
