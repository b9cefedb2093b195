from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import AfterCursor, CurrentTenant, PageLimit, RuntimeDep, SessionDep
from app.api.errors import problem_responses
from app.api.schemas.jobs import JobList, JobPublic, JobStatus
from app.services import jobs as service

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=problem_responses(401))

JobId = Annotated[str, Path(max_length=40, description="A job id (`job_…`).")]


@router.get("", name="list", summary="List jobs, newest first", responses=problem_responses(422))
async def list_jobs(
    db: SessionDep,
    tenant: CurrentTenant,
    limit: PageLimit,
    after: AfterCursor = None,
    session_id: Annotated[str | None, Query(max_length=40)] = None,
    status: JobStatus | None = None,
) -> JobList:
    page = await service.list_jobs(
        db, tenant, limit=limit, after=after, session_id=session_id, status=status
    )
    return JobList(data=[JobPublic.of(j) for j in page.data], next_cursor=page.next_cursor)


@router.get("/{job_id}", name="get", summary="Get a job", responses=problem_responses(404, 422))
async def get_job(job_id: JobId, db: SessionDep, tenant: CurrentTenant) -> JobPublic:
    return JobPublic.of(await service.get_job(db, tenant, job_id))


@router.post(
    "/{job_id}/cancel",
    name="cancel",
    summary="Cancel a queued or running job",
    description=(
        "A queued job is cancelled at once. A running one is stopped at its next step "
        "(`cancel_requested` is true until then); tool calls it leaves unanswered get an "
        "error result, so the log stays a valid conversation. 409 once the job has ended."
    ),
    responses=problem_responses(404, 409, 422),
)
async def cancel_job(
    job_id: JobId, db: SessionDep, tenant: CurrentTenant, runtime: RuntimeDep
) -> JobPublic:
    job = await service.cancel_job(db, tenant, job_id)
    runtime.hub.committed(job.session_id, job.id)
    return JobPublic.of(job)
