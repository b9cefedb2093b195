from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import FileResponse
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import (
    AdmissionDep,
    CurrentTenant,
    DatabaseDep,
    IdempotencyDep,
    JobCursor,
    PageLimit,
    RuntimeDep,
    SessionDep,
    SettingsDep,
    write_once,
)
from app.api.errors import problem_responses
from app.api.schemas.jobs import (
    CommentCreate,
    CommentList,
    CommentPublic,
    JobCreate,
    JobList,
    JobPublic,
    JobStatus,
    StoredFile,
    WorkspaceFiles,
)
from app.db.models import Job
from app.domain.client_tools import check_client_tools
from app.domain.downloads import OCTET_STREAM, SAFE_IMAGE_TYPES, download_policy
from app.domain.errors import InvalidInput
from app.domain.ids import new_id
from app.domain.jobs import RESERVED_PIECE_NAMES
from app.services import comments, job_files, workspaces
from app.services import jobs as service
from app.services.actions import pending_actions
from app.services.mcp_attach import Attachment, check_session_attachments
from app.services.piece_jobs import submit_job
from app.settings import Settings

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=problem_responses(401, 503))

JobId = Annotated[str, Path(max_length=40, description="A job id (`job_…`).")]
# the server refuses every other path with a 422 (app/services/workspaces.py)
WorkspacePath = Annotated[
    str,
    Path(
        max_length=1000,
        description="A path inside the folder: segments joined by `/`, none empty, `.` or "
        "`..`, with no backslash, NUL or percent-encoded (`%XX`) text.",
        json_schema_extra={"pattern": workspaces.PATH_PATTERN},
    ),
]

_BINARY = {"schema": {"type": "string", "format": "binary"}}
# a workspace file, as `download_policy` sends it
DOWNLOAD: dict[str, Any] = {
    "description": "The file, as an attachment: `application/octet-stream`, or its own type "
    "for a PNG, JPEG, GIF or WebP image (never SVG), with `nosniff` and a sandboxing CSP",
    "headers": {
        name: {"required": True, "schema": {"type": "string", "example": example}}
        for name, example in download_policy("notes.txt").headers.items()
    },
    "content": {
        OCTET_STREAM: {**_BINARY, "example": "Notes the job should read."},
        **dict.fromkeys(sorted(set(SAFE_IMAGE_TYPES.values())), _BINARY),
    },
}


@router.get(
    "",
    name="list",
    summary="List jobs, newest first",
    description="`session_id`, `status` and `parent_job_id` (a job's subtasks) filter "
    "before paging.",
    responses=problem_responses(422),
)
async def list_jobs(
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    limit: PageLimit,
    after: JobCursor = None,
    session_id: Annotated[str | None, Query(max_length=40)] = None,
    status: JobStatus | None = None,
    parent_job_id: Annotated[
        str | None, Query(max_length=40, description="Only the subtasks of this job.")
    ] = None,
) -> JobList:
    page = await service.list_jobs(
        db,
        tenant,
        limit=limit,
        after=after,
        session_id=session_id,
        status=status,
        parent_job_id=parent_job_id,
    )
    chars = settings.waiting_call_input_chars
    data = [
        JobPublic.of(
            j,
            await service.waiting_children(db, j, call_input_chars=chars),
            await pending_actions(db, j),
        )
        for j in page.data
    ]
    return JobList(data=data, next_cursor=page.next_cursor)


@router.get(
    "/{job_id}",
    name="get",
    summary="Get a job",
    description="A job `waiting_subtasks` lists in `waiting_on` the subtasks (at any depth) "
    "waiting for a human, with their questions (a subtask held on tool calls: those calls, "
    "each its tool and input); a comment on a subtask that asked answers it. "
    "A job `waiting_human` on tool calls lists them in `required_action`.",
    responses=problem_responses(404, 422),
)
async def get_job(
    job_id: JobId, db: SessionDep, tenant: CurrentTenant, settings: SettingsDep
) -> JobPublic:
    job = await service.get_job(db, tenant, job_id)
    chars = settings.waiting_call_input_chars
    return JobPublic.of(
        job,
        await service.waiting_children(db, job, call_input_chars=chars),
        await pending_actions(db, job),
    )


@router.post(
    "/{job_id}/cancel",
    name="cancel",
    summary="Cancel a job and its open subtasks",
    description=(
        "A draft, queued or waiting job is cancelled at once. A running one is stopped at "
        "its next step (`cancel_requested` is true until then); tool calls it leaves "
        "unanswered get an error result, so the log stays a valid conversation. Its open "
        "subtasks, at every depth, are cancelled the same way. 409 once the job has ended."
    ),
    responses=problem_responses(404, 409, 422),
)
async def cancel_job(job_id: JobId, database: DatabaseDep, tenant: CurrentTenant) -> JobPublic:
    return JobPublic.of(await database.write(lambda db: service.cancel_job(db, tenant, job_id)))


@router.post(
    "",
    status_code=201,
    response_model=JobPublic,
    name="create",
    summary="Submit a job that runs a piece",
    description=(
        "Runs `piece` (default `default`) on `instruction`, in `session_id` or in a new "
        "session. The worker builds the enriched instruction (time, the last 5 comments, "
        "the workspace's file lists, the instruction) and runs the piece's movements. "
        "With `start: false` the job is a `draft`: upload its input files and comment on "
        "it, then `POST /jobs/{job_id}/start`; a draft never runs before. Chat turns are "
        "not pieces: send them with `POST /sessions/{session_id}/messages`. "
        "`files` copies stored files (`POST /files`) into its `input/` folder first. "
        "A tenant with STRATA_TENANT_MAX_ACTIVE_JOBS jobs queued or running (imports "
        "running count too) gets 429 with `Retry-After`, unless the job is a draft."
    ),
    responses=problem_responses(404, 413, 422, 429),
)
async def create_job(
    body: JobCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
    idempotency: IdempotencyDep,
    admission: AdmissionDep,
) -> object:
    piece = runtime.pieces.get(body.piece)
    if piece is None:
        known = sorted(runtime.pieces.pieces)
        hint = (
            "; it is a job kind, not a piece (chat turns: POST /sessions/{id}/messages)"
            if body.piece in RESERVED_PIECE_NAMES
            else ""
        )
        raise InvalidInput(f"unknown piece {body.piece!r}{hint}; known: {known}", field="piece")
    client_tools = check_client_tools(
        body.client_tools, runtime.tools.names, runtime.settings.client_tools_max
    )

    mcp = await check_session_attachments(
        database, runtime.settings, tenant, [Attachment.of(a.model_dump()) for a in body.mcp]
    )
    files = await job_files.check(
        database,
        runtime.settings,
        tenant,
        [job_files.Entry(file_id=f.file_id, path=f.path) for f in body.files],
    )
    job_id = new_id("job")

    async def work(db: AsyncSession) -> JobPublic:
        if body.start:
            await admission.admit_job(db, tenant)
        # before the commit: no runner sees the job before its input is there
        await job_files.copy_in(runtime.settings, job_id, files)
        job = await submit_job(
            db,
            tenant,
            instruction=body.instruction,
            piece=piece,
            session_id=body.session_id,
            start=body.start,
            client_tools=client_tools,
            mcp=mcp,
            job_id=job_id,
        )
        return JobPublic.of(job)

    return await write_once(
        database, idempotency, 201, work, location=lambda job: f"/jobs/{job['id']}"
    )


@router.post(
    "/{job_id}/start",
    name="start",
    summary="Start a draft job",
    description="Queues a job created with `start: false`, with the files and comments it "
    "has by now. 409 for a job that is not a draft (it has started, or ended). A tenant "
    "with STRATA_TENANT_MAX_ACTIVE_JOBS jobs queued or running gets 429 with `Retry-After`.",
    responses=problem_responses(404, 409, 422, 429),
)
async def start_job(
    job_id: JobId, database: DatabaseDep, tenant: CurrentTenant, admission: AdmissionDep
) -> JobPublic:
    async def work(db: AsyncSession) -> Job:
        await admission.admit_job(db, tenant)
        return await service.start_job(db, tenant, job_id)

    return JobPublic.of(await database.write(work))


@router.post(
    "/{job_id}/comments",
    status_code=201,
    response_model=CommentPublic,
    name="comment",
    summary="Comment on a job",
    description="A comment on a job waiting for a human (ASK) re-queues it; it resumes "
    "at the movement that asked. A draft takes comments too (they are in its first "
    "prompt). The last 5 comments go into every movement's prompt. 409 once the job has "
    "ended (succeeded, failed, aborted or cancelled): nothing would read the comment.",
    responses=problem_responses(404, 409, 413, 422),
)
async def comment(
    job_id: JobId,
    body: CommentCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    idempotency: IdempotencyDep,
) -> object:
    async def work(db: AsyncSession) -> CommentPublic:
        row = await comments.add_comment(db, tenant, job_id, body.body)
        return CommentPublic.model_validate(row, from_attributes=True)

    # comments have no URL of their own: the list they were added to
    return await write_once(
        database, idempotency, 201, work, location=lambda c: f"/jobs/{c['job_id']}/comments"
    )


@router.get(
    "/{job_id}/comments",
    name="comments",
    summary="A job's comments, oldest first",
    description=("Every comment made on the job, in the order they were made."),
    responses=problem_responses(404, 422),
)
async def list_comments(job_id: JobId, db: SessionDep, tenant: CurrentTenant) -> CommentList:
    rows = await comments.list_comments(db, tenant, job_id)
    return CommentList(data=[CommentPublic.model_validate(r, from_attributes=True) for r in rows])


@router.get(
    "/{job_id}/files",
    name="files",
    summary="The files of a job's input/ and output/ folders",
    description=(
        "The paths of the files in each folder of the job's workspace, relative "
        "to that folder; the content is read with the two download operations."
    ),
    responses=problem_responses(404, 422),
)
async def list_files(
    job_id: JobId, db: SessionDep, tenant: CurrentTenant, settings: SettingsDep
) -> WorkspaceFiles:
    job = await service.get_job(db, tenant, job_id)
    inputs, outputs = workspaces.list_files(settings, job)
    return WorkspaceFiles(input=inputs, output=outputs)


@router.put(
    "/{job_id}/files/input/{path:path}",
    status_code=201,
    name="put_input",
    summary="Upload a file into the job's input/ folder (the raw body is the content)",
    description="`input/subtasks/` is the runner's (the outputs of finished subtasks are "
    "copied there): an upload into it is a 422.",
    responses=problem_responses(404, 413, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {
                    "schema": {"type": "string", "format": "binary"},
                    "example": "Notes the job should read.",
                }
            },
        }
    },
)
async def put_input(
    job_id: JobId,
    path: WorkspacePath,
    request: Request,
    response: Response,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> StoredFile:
    job = await service.get_job(db, tenant, job_id)
    data = await request.body()
    stored = await workspaces.put_input_file(settings, job, path, data)
    response.headers["Location"] = f"/jobs/{job.id}/files/{quote(stored)}"
    return StoredFile(path=stored, size=len(data))


@router.get(
    "/{job_id}/files/input/{path:path}",
    name="get_input",
    summary="Download a file of the job's input/ folder",
    description=(
        "The file as an attachment named by its last path segment, with `nosniff` "
        "and a sandbox policy; a path that leaves the folder is a 422, a missing "
        "file a 404."
    ),
    response_class=FileResponse,
    responses={200: DOWNLOAD, **problem_responses(404, 422)},
)
async def get_input(
    job_id: JobId,
    path: WorkspacePath,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> FileResponse:
    return _download(settings, await service.get_job(db, tenant, job_id), "input", path)


@router.get(
    "/{job_id}/files/output/{path:path}",
    name="get_output",
    summary="Download a file of the job's output/ folder",
    description=(
        "What the job wrote, as an attachment named by its last path segment, "
        "with `nosniff` and a sandbox policy; a path that leaves the folder is a "
        "422, a missing file a 404."
    ),
    response_class=FileResponse,
    responses={200: DOWNLOAD, **problem_responses(404, 422)},
)
async def get_output(
    job_id: JobId,
    path: WorkspacePath,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> FileResponse:
    return _download(settings, await service.get_job(db, tenant, job_id), "output", path)


def _download(settings: Settings, job: Job, area: workspaces.Area, path: str) -> FileResponse:
    download = download_policy(path)
    return FileResponse(
        workspaces.file_path(settings, job, area, path),
        media_type=download.media_type,
        headers=download.headers,
    )
