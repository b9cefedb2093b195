"""Jobs: the list, a new job (or draft), and a job's page (movements, context, lessons,
comments, subtasks, workspace files) with its live stream; start, cancel, reply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from app.console import auth
from app.console.api import ApiError, ApiResponse, PublicApi
from app.console.live import JobFeed, actions_digest, q, relay
from app.console.render import read_stamp
from app.console.web import (
    Api,
    Form,
    LastWords,
    PageSize,
    Templates,
    done,
    flash,
    fragment,
    is_htmx,
    text,
    upload,
)
from app.domain.downloads import download_policy
from app.domain.jobs import JobStatus

router = APIRouter(prefix="/console/jobs")

STATUSES = tuple(status.value for status in JobStatus)


@router.get("")
async def jobs(request: Request, api: Api, templates: Templates, page: PageSize) -> Response:
    status = request.query_params.get("status", "")
    status = status if status in STATUSES else ""
    listed = await api.get(
        "/jobs", limit=page, after=request.query_params.get("after"), status=status
    )
    pieces = (await api.get("/pieces"))["data"]
    return templates.page(
        request,
        "jobs.html",
        jobs=listed["data"],
        next_cursor=listed["next_cursor"],
        first_page=not request.query_params.get("after"),
        status=status,
        statuses=STATUSES,
        pieces=pieces,
    )


@router.post("")
async def create_job(request: Request, api: Api, form: Form) -> Response:
    body: dict[str, Any] = {
        "instruction": text(form, "instruction"),
        "piece": text(form, "piece") or "default",
        "start": text(form, "start") != "draft",
    }
    if text(form, "session_id"):
        body["session_id"] = text(form, "session_id")
    created = await api.send("POST", "/jobs", body)
    return RedirectResponse(f"/console/jobs/{q(created['id'])}", status_code=303)


async def _panels(api: PublicApi, job_id: str) -> dict[str, Any]:
    path = f"/jobs/{q(job_id)}"
    as_of = read_stamp()
    job = await api.get(path)
    return {
        "as_of": as_of,
        "job": job,
        "actions_digest": actions_digest(job.get("required_action") or []),
        "comments": (await api.get(f"{path}/comments"))["data"],
        "files": await api.get(f"{path}/files"),
        "children": (await api.get("/jobs", parent_job_id=job_id, limit=200))["data"],
    }


@router.get("/{job_id}")
async def job_page(job_id: str, request: Request, api: Api, templates: Templates) -> Response:
    return templates.page(request, "job.html", **await _panels(api, job_id))


async def _first_movement(api: PublicApi, job: dict[str, Any]) -> str | None:
    if not job.get("piece"):
        return None
    try:
        piece = await api.get(f"/pieces/{q(job['piece'])}")
    except ApiError:  # a piece no longer loaded: the timeline names no movement then
        return None
    first = piece.get("initial_movement") or piece["movements"][0]["name"]
    return str(first)


@router.get("/{job_id}/live")
async def live(
    job_id: str, request: Request, api: Api, templates: Templates, last_word: LastWords
) -> Response:
    job = await api.get(f"/jobs/{q(job_id)}")  # a 404 (or 401) before the stream starts
    last = request.headers.get("last-event-id")
    # the timeline names the movement each transition left: on a fresh page it starts
    # at the piece's first one; on a reconnect at the one the job is at now
    movement = job.get("movement") if last else await _first_movement(api, job)
    feed = JobFeed(
        api,
        templates,
        resumed=bool(last),
        csrf=auth.csrf_token(request),
        job_id=job_id,
        movement=movement,
        actions=request.query_params.get("actions", ""),
    )
    return StreamingResponse(
        relay(api, f"/jobs/{q(job_id)}/events", last, feed, last_word),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _summary(api: PublicApi, templates: Templates, request: Request, job_id: str) -> str:
    job = await api.get(f"/jobs/{q(job_id)}")
    return templates.fragment("partials/job_summary.html", job=job, csrf=auth.csrf_token(request))


@router.post("/{job_id}/start")
async def start(
    job_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    await api.send("POST", f"/jobs/{q(job_id)}/start")
    html = await _summary(api, templates, request, job_id)
    return done(request, f"/console/jobs/{q(job_id)}", html)


@router.post("/{job_id}/cancel")
async def cancel(
    job_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    await api.send("POST", f"/jobs/{q(job_id)}/cancel")
    html = await _summary(api, templates, request, job_id)
    return done(request, f"/console/jobs/{q(job_id)}", html)


@router.post("/{job_id}/comments")
async def reply(
    job_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    path = f"/jobs/{q(job_id)}"
    await api.send("POST", f"{path}/comments", {"body": text(form, "body")})
    as_of = read_stamp()
    comments = (await api.get(f"{path}/comments"))["data"]
    html = templates.fragment("partials/comments.html", comments=comments, as_of=as_of)
    return done(request, f"/console/jobs/{q(job_id)}#comments-section", html)


@router.post("/{job_id}/files")
async def put_file(
    job_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    """A file from the upload form into the job's `input/` (under the name given, else the
    file's own), through `PUT /jobs/{id}/files/input/{path}`."""
    sent = upload(form, "file")
    if sent is None or not sent.filename:
        if is_htmx(request):  # the message goes to the alert line, the list stays
            return fragment(flash("Choose a file first."), **{"HX-Reswap": "none"})
        return RedirectResponse(f"/console/jobs/{q(job_id)}#files-section", status_code=303)
    name = text(form, "path") or (sent.filename or "upload")
    content = await sent.read()
    path = "/".join(q(part) for part in name.split("/"))
    answer = await api.request(
        "PUT",
        f"/jobs/{q(job_id)}/files/input/{path}",
        body=content,
        headers={"content-type": "application/octet-stream"},
    )
    answer.raise_for_status()
    as_of = read_stamp()
    files = await api.get(f"/jobs/{q(job_id)}/files")
    job = await api.get(f"/jobs/{q(job_id)}")
    html = templates.fragment("partials/files.html", files=files, job=job, as_of=as_of)
    return done(request, f"/console/jobs/{q(job_id)}#files-section", html)


@router.get("/{job_id}/files/{area}/{path:path}")
async def download(job_id: str, area: str, path: str, api: Api) -> Response:
    """The file as `GET /jobs/{id}/files/{area}/{path}` sends it, streamed on, as the same
    download (`download_policy`): the browser is on the server's origin here too."""
    quoted = "/".join(q(part) for part in path.split("/"))
    stack = AsyncExitStack()
    upstream = await stack.enter_async_context(
        api.stream("GET", f"/jobs/{q(job_id)}/files/{q(area)}/{quoted}")
    )
    if upstream.status != 200:
        async with stack:
            content = b"".join([chunk async for chunk in upstream.chunks()])
        ApiResponse(upstream.status, upstream.headers, content).raise_for_status()

    async def body() -> AsyncIterator[bytes]:
        async with stack:
            async for chunk in upstream.chunks():
                yield chunk

    download = download_policy(path)
    headers = dict(download.headers)
    for header in ("content-length", "last-modified", "etag"):
        if header in upstream.headers:
            headers[header] = upstream.headers[header]
    return StreamingResponse(body(), media_type=download.media_type, headers=headers)
