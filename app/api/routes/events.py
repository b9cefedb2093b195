"""The two Server-Sent Event streams. Served as a plain streaming response, so that the
keep-alive comment is ours alone (one per STRATA_SSE_KEEPALIVE_SECONDS of quiet)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import Response, StreamingResponse
from fastapi.sse import format_sse_event

from app.api.deps import CurrentTenant, DatabaseDep, RuntimeDep, SettingsDep, StreamGrant
from app.api.errors import problem_responses
from app.api.routes.jobs import JobId
from app.api.routes.sessions import SessionId
from app.api.schemas.events import STREAM_DESCRIPTION, stream_responses
from app.api.schemas.items import item_public
from app.observability.metrics import OPEN_STREAMS
from app.services.jobs import peek_job
from app.services.sessions import check_session
from app.services.streams import (
    Grant,
    StreamEvent,
    event_batches,
    job_has_ended,
    nothing_left_to_stream,
    parse_last_event_id,
)
from app.settings import Settings
from app.wiring import Runtime

router = APIRouter(tags=["events"], responses=problem_responses(401, 503))

LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=30,
        pattern=r"^(0|[1-9][0-9]{0,17})(\.[1-9][0-9]{0,8})?$",
        description="The `id` of the last event received (`N` or `N.M`): the stream "
        "replays the durable events after it. A browser's EventSource sends it itself.",
    ),
]
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _frames(batch: list[StreamEvent] | None) -> bytes:
    """A batch's events as one piece of the response (one write to the client)."""
    if batch is None:
        return KEEPALIVE
    return b"".join(_frame(event) for event in batch)


def _frame(event: StreamEvent) -> bytes:
    data: dict[str, Any] = dict(event.data)
    if "item" in data:
        data["item"] = item_public(data["item"]).model_dump(mode="json")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return format_sse_event(data_str=payload, event=event.type, id=event.id)


def _respond(
    runtime: Runtime,
    settings: Settings,
    tenant: str,
    session_id: str,
    job_id: str | None,
    last_event_id: int,
    grant: Grant,
) -> StreamingResponse:
    kind = "job" if job_id is not None else "session"
    ended = job_has_ended(runtime.database, tenant, job_id) if job_id is not None else None

    async def frames() -> AsyncIterator[bytes]:
        OPEN_STREAMS.labels(kind).inc()
        try:
            async for batch in event_batches(
                runtime.database,
                runtime.hub,
                session_id=session_id,
                job_id=job_id,
                last_event_id=last_event_id,
                keepalive_seconds=settings.sse_keepalive_seconds,
                job_ended=ended,
                grant=grant,
            ):
                yield _frames(batch)
        finally:
            OPEN_STREAMS.labels(kind).dec()

    return StreamingResponse(frames(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.get(
    "/sessions/{session_id}/events",
    name="session_stream",
    summary="Stream a session's events",
    description=STREAM_DESCRIPTION,
    response_class=StreamingResponse,
    responses={**stream_responses(), **problem_responses(404, 422)},
)
async def session_events(
    session_id: SessionId,
    database: DatabaseDep,
    runtime: RuntimeDep,
    settings: SettingsDep,
    tenant: CurrentTenant,
    grant: StreamGrant,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    after = parse_last_event_id(last_event_id)
    # an unknown session is a 404 before the stream starts (one prepared statement)
    await database.read_statements(lambda db: check_session(db, tenant, session_id))
    return _respond(runtime, settings, tenant, session_id, None, after, grant)


@router.get(
    "/jobs/{job_id}/events",
    name="job_stream",
    summary="Stream a job's events until it ends",
    description=STREAM_DESCRIPTION
    + "\n\nThe stream ends once the job has ended and every event after `Last-Event-ID` "
    "was sent, whatever that id is. Asked again past the end of an ended job, it answers "
    "`204 No Content`, which makes a browser's EventSource stop reconnecting.",
    response_class=StreamingResponse,
    responses={
        **stream_responses(),
        204: {"description": "The job has ended and nothing follows `Last-Event-ID`."},
        **problem_responses(404, 422),
    },
)
async def job_events(
    job_id: JobId,
    database: DatabaseDep,
    runtime: RuntimeDep,
    settings: SettingsDep,
    tenant: CurrentTenant,
    grant: StreamGrant,
    last_event_id: LastEventId = None,
) -> Response:
    after = parse_last_event_id(last_event_id)
    job = await peek_job(database, tenant, job_id)
    if await nothing_left_to_stream(database, job, after):
        # an empty 200 would end at once, and a browser's EventSource reconnects to an
        # ended stream every few seconds forever; a 204 tells it to stop
        return Response(status_code=204)
    return _respond(runtime, settings, tenant, job.session_id, job.id, after, grant)
