from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import (
    AdmissionDep,
    CurrentTenant,
    DatabaseDep,
    IdempotencyDep,
    RuntimeDep,
    SettingsDep,
    replayed,
)
from app.api.errors import TYPE_PREFIX, problem_response, problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.jobs import JobPublic, MessageAccepted, MessageCreate, MessageReply
from app.db.models import Job
from app.domain.jobs import TERMINAL, EndCause, JobStatus, end_cause
from app.services import files
from app.services.actions import pending_actions
from app.services.chat import IfBusy, enqueue_compaction, message_client_tools, send_message
from app.services.idempotency import Replay
from app.services.turn_control import interrupt_session
from app.services.waiting import wait_for_job
from app.settings import Settings
from app.wiring import Runtime


async def _ended_or_timed_out(
    runtime: Runtime, settings: Settings, tenant: str, job_id: str, seconds: float | None
) -> Job:
    """The job once it ended, or as it is after `seconds` (default STRATA_CHAT_WAIT_SECONDS)."""
    return await wait_for_job(
        runtime.database,
        runtime.hub,
        tenant,
        job_id,
        within=seconds or settings.chat_wait_seconds,
    )


# The status a waiting client gets for a job that ended without succeeding: the server's
# state (503), the upstream LLM's failure (502), a conflict with the session's state or a
# cancel (409: the client compacts, shortens the system prompt, continues in a new message
# or session), anything else the server's fault (500).
_STATUS_BY_CAUSE: dict[EndCause, int] = {
    EndCause.cancelled: 409,
    EndCause.session_state: 409,
    EndCause.llm_not_configured: 503,
    EndCause.upstream: 502,
    EndCause.unexplained: 500,
    EndCause.internal: 500,
}


def _failure(job: Job, cause: EndCause) -> dict[str, Any]:
    """The problem a job that did not succeed answers with: its own `error` (an interrupted
    turn's is `interrupted`), unless it names no cause or the job was cancelled without
    one."""
    if cause is EndCause.cancelled and not (job.error or {}).get("type"):
        return {
            "type": TYPE_PREFIX + "job-cancelled",
            "title": "Cancelled",
            "detail": "the job was cancelled before it ended",
        }
    if cause is EndCause.unexplained:
        return {
            "type": TYPE_PREFIX + "job-failed",
            "title": "Job failed",
            "detail": f"the job ended {job.status}",
        }
    return dict(job.error or {})


def _ended(job: Job, success: BaseModel) -> JSONResponse:
    """200 with `success` when the job succeeded, else the job's own problem with the status
    that names its cause (`end_cause`), and the job itself as `job`."""
    if job.status == JobStatus.succeeded:
        return JSONResponse(success.model_dump(mode="json"), status_code=200)
    cause = end_cause(job.status, job.error)
    problem = _failure(job, cause)
    own = {"type", "title", "detail", "status", "instance"}
    extensions = {k: v for k, v in problem.items() if k not in own}
    return problem_response(
        _STATUS_BY_CAUSE[cause],
        str(problem.get("detail") or f"the job ended {job.status}"),
        slug=str(problem["type"]).removeprefix(TYPE_PREFIX),
        title=str(problem.get("title") or "") or None,
        **extensions,
        job_id=job.id,
        job=JobPublic.of(job).model_dump(mode="json"),
    )


router = APIRouter(
    prefix="/sessions/{session_id}", tags=["chat"], responses=problem_responses(401, 503)
)


@router.post(
    "/messages",
    status_code=202,
    response_model=MessageAccepted,
    name="send",
    summary="Send a user message; an agent turn answers it in the background",
    description=(
        "Appends the user message and enqueues the `chat` job that answers it, in one "
        "transaction (202). A message sent while a turn runs is queued behind it "
        "(`if_busy=enqueue`, its user item is appended when its turn starts), refused "
        "with 409 (`if_busy=reject`), queued behind it after interrupting it "
        "(`if_busy=interrupt`, as `POST /sessions/{session_id}/interrupt` does), or taken "
        "by it (`if_busy=steer`): the running chat turn appends it at its next step, after "
        "that step's tool results and before its next request, and the message's job "
        "ends `succeeded` with `result.steered_into` naming the job whose turn took it "
        "(event `turn.steered`); a turn that ends before its next step leaves it to run "
        "as the next turn. `if_busy=rollback` interrupts the running turn and, once it "
        "ended, rewinds to before its user message (event `session.rewound`; the turn stays "
        "in `/items`, `reverted`) and runs this message instead. "
        "On an idle session every `if_busy` sends a plain message. "
        "With `wait=true` the request blocks until the turn ends, waits for people (a tool "
        "call a policy asks about: 202, its `job` lists `required_action`) or `timeout` "
        "seconds pass (then 202, as without `wait`): 200 with the reply "
        "when it succeeded (a steer taken by another turn: `text` null), else the job's "
        "problem (`job` holds the job): 503 "
        "`llm-not-configured`, 502 for an LLM failure (`llm-rate-limited`, "
        "`llm-overloaded`, `llm-timeout`, ...), 409 `job-cancelled`, `interrupted`, "
        "`context-exhausted` (the session's context cannot hold the next request even "
        "after compaction) or `agent-max-iterations` (the turn stopped at "
        "STRATA_AGENT_MAX_ITERATIONS LLM calls; a new message continues it), "
        "500 `job-crashed`. "
        "A tenant with STRATA_TENANT_MAX_ACTIVE_JOBS jobs queued or running (imports "
        "running count too) gets 429 with `Retry-After`; a waiting request holds nothing."
    ),
    responses={
        200: {"model": MessageReply, "description": "The turn succeeded while waiting."},
        **problem_responses(404, 409, 413, 422, 429, 500, 502),
    },
)
async def send(
    session_id: SessionId,
    body: MessageCreate,
    database: DatabaseDep,
    runtime: RuntimeDep,
    settings: SettingsDep,
    tenant: CurrentTenant,
    idempotency: IdempotencyDep,
    admission: AdmissionDep,
    if_busy: IfBusy = IfBusy.enqueue,
    wait: bool = False,
    wait_seconds: Annotated[
        float | None,
        Query(alias="timeout", gt=0, le=600, description="Longest wait, in seconds."),
    ] = None,
) -> object:
    client_tools = message_client_tools(
        body.client_tools, if_busy, runtime.tools.names, settings.client_tools_max
    )
    blocks = await files.message_blocks(
        database, settings, tenant, body.text, files.parts_of(body.content)
    )

    async def work(db: AsyncSession) -> MessageAccepted:
        await admission.admit_job(db, tenant)
        job = await send_message(db, tenant, session_id, blocks, if_busy, client_tools=client_tools)
        return MessageAccepted(job_id=job.id, turn=job.turn, job=JobPublic.of(job))

    answer = await database.write_statements(idempotency.once(202, work))
    if not wait:
        return replayed(answer) if isinstance(answer, Replay) else answer
    job_id = str(answer.body["job_id"]) if isinstance(answer, Replay) else answer.job_id
    job = await _ended_or_timed_out(runtime, settings, tenant, job_id, wait_seconds)
    if job.status in TERMINAL:
        reply = MessageReply(
            job_id=job.id,
            turn=job.turn,
            text=(job.result or {}).get("text"),
            job=JobPublic.of(job),
        )
        return _ended(job, reply)
    async with database.read() as db:  # a turn waiting for people lists what it waits on
        actions = await pending_actions(db, job)
    return MessageAccepted(job_id=job.id, turn=job.turn, job=JobPublic.of(job, (), actions))


@router.post(
    "/interrupt",
    response_model=JobPublic,
    name="interrupt",
    summary="Interrupt the session's running turn",
    description=(
        "Stops the session's turn (its first queued or running job, or its chat turn "
        "waiting for people) at once: an LLM "
        "stream is aborted and running tools are killed with their process group. Every "
        'tool call it leaves unanswered gets an error result ("interrupted by the '
        'user") in the transaction that ends the job `cancelled` with `error.type` '
        "`interrupted`, so the next request is valid; `turn.interrupted` is recorded "
        "with it. Answers the job as it is now (a running one: `cancel_requested`, it "
        "ends moments later; a queued one: ended). Turns queued behind it run next, in "
        "order. 409 (`reason: session-idle`) when the session has no turn to interrupt."
    ),
    responses=problem_responses(404, 409, 422),
)
async def interrupt(
    session_id: SessionId, database: DatabaseDep, tenant: CurrentTenant
) -> JobPublic:
    job = await database.write(lambda db: interrupt_session(db, tenant, session_id))
    return JobPublic.of(job)


@router.post(
    "/compact",
    status_code=202,
    response_model=JobPublic,
    name="compact",
    summary="Compact the session's context now",
    description=(
        "Enqueues a `compact` job behind any running turn: the summary model summarizes "
        "the current segment (it sees the whole task list but cannot change it) and a new "
        "segment starts with the summary, the full task snapshot and a TaskList call with "
        "its result. On failure (after 2 retries) the job fails and nothing changes. "
        "With `wait=true`, answers 200 once the job succeeded, or the job's problem as "
        "`POST /sessions/{session_id}/messages` does."
    ),
    responses={
        200: {"model": JobPublic, "description": "The compaction succeeded."},
        **problem_responses(404, 409, 422, 500, 502),
    },
)
async def compact(
    session_id: SessionId,
    database: DatabaseDep,
    runtime: RuntimeDep,
    settings: SettingsDep,
    tenant: CurrentTenant,
    wait: bool = False,
) -> object:
    job = await database.write(lambda db: enqueue_compaction(db, tenant, session_id))
    if wait:
        job = await _ended_or_timed_out(runtime, settings, tenant, job.id, None)
        if job.status in TERMINAL:
            return _ended(job, JobPublic.of(job))
    return JobPublic.of(job)
