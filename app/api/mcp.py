"""Strata as an MCP server at `/mcp`: the memory and the tasks a model may read (and, with
`STRATA_MCP_WRITE_TOOLS`, write) as MCP tools, on the official `mcp` SDK.

The transport is Streamable HTTP in its stateless JSON mode: every POST carries its whole
exchange and gets one JSON answer, so any process of the deployment answers any request
and nothing is kept between them. It runs inside the API's own application, behind the
same middleware (request ids, the `Host` and cross-site checks, the body limit): a request
is authenticated by the same API keys (401 problem+json with `WWW-Authenticate: Bearer`
without a valid one), and every tool reads and writes as that key's tenant through the
same services as the REST routes. The SDK's own DNS-rebinding check is off: the site
guard is this server's, configured once for both.

Every answer is text of at most `STRATA_MCP_ANSWER_MAX_CHARS` characters whose last line
says which page it is and how to read on. The route is a plain ASGI route, outside the
OpenAPI document (it is JSON-RPC, not REST).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.types import Receive, Scope, Send

import app as app_package
from app.api.errors import headers_of, problem_response
from app.db.engine import Database
from app.db.models import Job
from app.db.repositories.memory import FoundTurn
from app.domain.errors import DomainError, Unauthorized
from app.domain.ids import new_id
from app.domain.tasks import TaskStatus
from app.memory.details import PIECE_KINDS, DetailQuery
from app.memory.render import cut
from app.services import comments as comment_service
from app.services import job_files
from app.services import jobs as job_service
from app.services import memory as memory_service
from app.services import memory_search as search_service
from app.services import tasks as task_service
from app.services.auth import Authenticator
from app.services.limits import Admission
from app.services.piece_jobs import submit_job
from app.settings import Settings
from app.wiring import Runtime

PATH = "/mcp"
# room kept under the cap for the last line, which says how to read on
_FOOTER_ROOM = 200


@dataclass(frozen=True)
class Caller:
    """Who asks (the key's tenant) and what this process answers with."""

    tenant: str
    database: Database
    settings: Settings
    admission: Admission
    runtime: Runtime


_caller: ContextVar[Caller] = ContextVar("strata_mcp_caller")


def _current() -> Caller:
    try:
        return _caller.get()
    except LookupError as exc:  # a tool called outside a request of the endpoint
        raise ToolError("no authenticated request") from exc


async def _read(work: Callable[[AsyncSession, Caller], Any]) -> Any:
    """Run `work` in a read unit of work as the caller; a domain error becomes the tool's
    error, which the model reads."""
    caller = _current()
    try:
        async with caller.database.read() as db:
            return await work(db, caller)
    except DomainError as exc:
        raise ToolError(exc.detail) from exc


async def _write(work: Callable[[AsyncSession, Caller], Any]) -> Any:
    """Run `work` as one write unit of work of the caller (as a REST write runs)."""
    caller = _current()
    try:
        return await caller.database.write(lambda db: work(db, caller))
    except DomainError as exc:
        raise ToolError(exc.detail) from exc


def paged(lines: Sequence[str], *, cap: int, page: int, again: str = "call it again with") -> str:
    """`lines` packed into pages of at most `cap` characters (a longer line is cut into
    parts), page `page` of them, and a last line naming the page and how to read on
    (`again`: how to ask for another page, e.g. `call memory_search again with`)."""
    room = max(1, cap - _FOOTER_ROOM)
    pages: list[list[str]] = [[]]
    used = 0
    for line in lines:
        parts = [line[i : i + room] for i in range(0, len(line), room)] or [""]
        for part in parts:
            if pages[-1] and used + len(part) + 1 > room:
                pages.append([])
                used = 0
            pages[-1].append(part)
            used += len(part) + 1
    shown = pages[page - 1] if page <= len(pages) else []
    return "\n".join([*shown, footer(page, len(pages), again)])


def footer(page: int, pages: int, again: str) -> str:
    """The last line of an answer: which page it is, and how to read on."""
    pages = max(1, pages)
    if page < pages:
        return f"(page {page} of {pages}; {again} page={page + 1} to read on)"
    if page == pages:
        return f"(page {page} of {pages}: the end)"
    return f"(page {page} is past the last page, {pages})"


def _moment(value: str | None, caller: Caller, field: str) -> datetime | None:
    """An ISO 8601 date-time; one without an offset is read in the display time zone."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ToolError(f"{field}: not an ISO 8601 date-time: {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=caller.settings.zone)
    return moment


def _stamp(moment: datetime, caller: Caller) -> str:
    return f"{moment.astimezone(caller.settings.zone):%Y-%m-%d %H:%M:%S}"


def _turn_line(turn: FoundTurn, caller: Caller, mark: str = " ") -> str:
    """`[time] session turn N: summary`, or the turn's first words when it has none."""
    if turn.l1:
        text = turn.l1
    else:
        said = [t.strip() for t in (turn.user_text, turn.assistant_text) if t.strip()]
        text = " → ".join(" ".join(t.split()) for t in said)
    stamp = _stamp(turn.ended_at, caller)
    head = f"{mark}[{stamp}] {turn.origin_session_id} turn {turn.turn}: "
    return head + cut(" ".join(text.split()), caller.settings.memory_search_line_chars)


Project = Annotated[
    str | None,
    Field(
        description="The project's folder (Claude Code's working directory): search and "
        "read the sessions of that project. Without it: every session."
    ),
]
SessionArg = Annotated[
    str | None,
    Field(
        description="A session id (`ses_…`, as a search hit names it); without it, the "
        "newest Claude Code session of the project."
    ),
]
Page = Annotated[int, Field(ge=1, le=100_000, description="1 for the first page.")]


class JobFileArg(BaseModel):
    """A stored file a submitted job finds in its input/ folder."""

    model_config = ConfigDict(extra="forbid")

    file_id: str = Field(min_length=1, max_length=40, description="A stored file (`fil_…`).")
    path: str = Field(
        min_length=1, max_length=1000, description="Where it goes, relative to input/."
    )


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True)


def build_server(settings: Settings) -> MCPServer:
    """The MCP server and its tools (the write tools only when enabled)."""
    server = MCPServer(
        name="strata",
        version=app_package.__version__,
        instructions=(
            "Strata keeps the memory of earlier sessions of this project. Search it by "
            "words (memory_search), read the turns around a hit (memory_timeline) and a "
            "turn's full detail: tool inputs and outputs (memory_detail). Pass your working "
            "directory as `project`."
        ),
    )
    cap = settings.mcp_answer_max_chars
    most = settings.mcp_timeline_max_turns

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def memory_search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=500,
                description='Words and "quoted phrases"; every one must occur. No operators.',
            ),
        ],
        project: Project = None,
        since: Annotated[
            str | None, Field(description="ISO 8601: only turns that ended at or after it.")
        ] = None,
        until: Annotated[
            str | None, Field(description="ISO 8601: only turns that ended before it.")
        ] = None,
        limit: Annotated[
            int | None, Field(ge=1, le=1000, description="Hits at most (the server caps it).")
        ] = None,
        page: Page = 1,
    ) -> str:
        """Search the memory of earlier sessions (what the user and the assistant said,
        summaries, tool inputs and outputs) by words. Answers the best hits, one a line:
        `[time] session turn N layer [source]: line`; pass a hit's time (and session) to
        memory_detail or memory_timeline."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            request = search_service.SearchRequest(
                query,
                project,
                _moment(since, caller, "since"),
                _moment(until, caller, "until"),
                limit,
            )
            limits = search_service.SearchLimits.of(caller.settings)
            hits = await search_service.search(db, caller.tenant, request, limits)
            lines = [
                f"[{_stamp(h.ended_at, caller)}] {h.session_id} turn {h.turn} {h.layer} {h.line}"
                for h in hits
            ] or ["(no turn holds these words)"]
            return paged(lines, cap=cap, page=page, again="call memory_search again with")

        result: str = await _read(work)
        return result

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def memory_timeline(
        time: Annotated[
            str | None,
            Field(
                description="A time the turn ended, as a hit or the memory block shows it "
                "(`YYYY-MM-DD HH:MM:SS`, `HH:MM:SS`, or an ISO timestamp)."
            ),
        ] = None,
        turn: Annotated[
            int | None, Field(ge=0, description="A turn number of the session (a hit's).")
        ] = None,
        session_id: SessionArg = None,
        project: Project = None,
        before: Annotated[int, Field(ge=0, description="Turns before it.")] = 3,
        after: Annotated[int, Field(ge=0, description="Turns after it.")] = 3,
        page: Page = 1,
    ) -> str:
        """The turns around a point of a session's chain, one a line (its summary or its
        first words), the point marked `>`: a turn (`session_id` and `turn`), a time, or
        the newest turn when neither is given."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            found = await search_service.timeline(
                db,
                caller.tenant,
                project=project,
                session_id=session_id,
                time=time,
                turn=turn,
                before=min(before, most),
                after=min(after, most),
                tz=caller.settings.zone,
            )
            lines = [
                *(_turn_line(t, caller) for t in found.before),
                _turn_line(found.anchor, caller, ">"),
                *(_turn_line(t, caller) for t in found.after),
            ]
            return paged(lines, cap=cap, page=page, again="call memory_timeline again with")

        result: str = await _read(work)
        return result

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def memory_detail(
        time: Annotated[
            str,
            Field(
                min_length=1,
                max_length=60,
                description="`YYYY-MM-DD HH:MM:SS` (a hit's time), `HH:MM:SS`, `HH:MM`, a "
                "range `HH:MM-HH:MM` or an ISO timestamp.",
            ),
        ],
        kind: Annotated[
            str | None, Field(description=f"Only one kind of piece: {', '.join(PIECE_KINDS)}.")
        ] = None,
        grep: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="Only lines containing this."),
        ] = None,
        session_id: SessionArg = None,
        project: Project = None,
        page: Page = 1,
    ) -> str:
        """The full detail of the turns that ended at a time, across the session's chain:
        the user's and the assistant's text, tool inputs, tool outputs and system messages,
        newest first, a page at a time."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            if kind is not None and kind not in PIECE_KINDS:
                raise ToolError(f"kind must be one of {', '.join(PIECE_KINDS)}")
            session = await search_service.default_session(
                db, caller.tenant, project=project, session_id=session_id
            )
            query = DetailQuery(max_chars=cap - _FOOTER_ROOM, page=page, kind=kind, grep=grep)
            found = await memory_service.detail_page_of(
                db, caller.tenant, session.id, time, query, tz=caller.settings.zone
            )
            last = footer(page, found.pages, "call memory_detail again with")
            return f"{found.text}\n{last}" if found.text else last

        result: str = await _read(work)
        return result

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def tasks_list(
        project: Project = None, session_id: SessionArg = None, page: Page = 1
    ) -> str:
        """The task list of the session (`#id [status] subject`)."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            session = await search_service.default_session(
                db, caller.tenant, project=project, session_id=session_id
            )
            tasks = await task_service.list_tasks(db, caller.tenant, session.id)
            lines = [f"#{t.taskid} [{t.status}] {t.subject}" for t in tasks] or [
                f"(session {session.id} has no task)"
            ]
            return paged(lines, cap=cap, page=page, again="call tasks_list again with")

        result: str = await _read(work)
        return result

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def task_get(
        taskid: Annotated[int, Field(ge=1, description="The task's id in its session.")],
        project: Project = None,
        session_id: SessionArg = None,
        page: Page = 1,
    ) -> str:
        """One task of the session in full: status, subject, description."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            session = await search_service.default_session(
                db, caller.tenant, project=project, session_id=session_id
            )
            task = await task_service.get_task(db, caller.tenant, session.id, taskid)
            lines = [f"#{task.taskid} [{task.status}] {task.subject}", task.description]
            return paged(lines, cap=cap, page=page, again="call task_get again with")

        result: str = await _read(work)
        return result

    if settings.mcp_write_tools:
        _add_write_tools(server, settings)
    return server


WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)
JobId = Annotated[str, Field(min_length=1, max_length=40, description="A job id (`job_…`).")]


def _job_lines(job: Job) -> list[str]:
    """What `job_status` and `job_submit` answer of a job."""
    lines = [f"{job.id} [{job.status}] {job.kind} {job.piece or ''}".rstrip()]
    lines.append(
        f"session {job.session_id}" + (f", movement {job.movement}" if job.movement else "")
    )
    if job.error:
        lines.append(f"error: {job.error.get('detail') or job.error}")
    result = (job.result or {}).get("text")
    if result:
        lines.append(f"result: {result}")
    return lines


def _add_write_tools(server: MCPServer, settings: Settings) -> None:
    """The tools that change something, through the same services as the REST routes: a
    task write is a task event of the session's log (replay stays the only way its task
    list is built), a job is admitted by the tenant's cap as `POST /jobs` is."""
    cap = settings.mcp_answer_max_chars
    every = settings.task_checkpoint_ops

    @server.tool(annotations=WRITES, structured_output=False)
    async def task_create(
        subject: Annotated[str, Field(min_length=1, max_length=500)],
        description: Annotated[str, Field(max_length=20_000)] = "",
        project: Project = None,
        session_id: SessionArg = None,
    ) -> str:
        """Add a pending task to the session's task list."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            session = await search_service.default_session(
                db, caller.tenant, project=project, session_id=session_id
            )
            args = {"subject": subject, "description": description}
            task = await task_service.change_task(
                db, caller.tenant, session.id, "TaskCreate", args, checkpoint_every=every
            )
            return paged(
                [f"#{task.taskid} [{task.status}] {task.subject}"], cap=cap, page=1, again=""
            )

        result: str = await _write(work)
        return result

    @server.tool(annotations=WRITES, structured_output=False)
    async def task_update(
        taskid: Annotated[int, Field(ge=1)],
        status: TaskStatus | None = None,
        subject: Annotated[str | None, Field(min_length=1, max_length=500)] = None,
        description: Annotated[str | None, Field(max_length=20_000)] = None,
        project: Project = None,
        session_id: SessionArg = None,
    ) -> str:
        """Change a task's status, subject or description (`deleted` deletes it)."""
        changes = {
            name: value
            for name, value in (
                ("status", status),
                ("subject", subject),
                ("description", description),
            )
            if value is not None
        }
        if not changes:
            raise ToolError("name at least one of status, subject, description")

        async def work(db: AsyncSession, caller: Caller) -> str:
            session = await search_service.default_session(
                db, caller.tenant, project=project, session_id=session_id
            )
            args = {"taskid": taskid, **changes}
            task = await task_service.change_task(
                db, caller.tenant, session.id, "TaskUpdate", args, checkpoint_every=every
            )
            return paged(
                [f"#{task.taskid} [{task.status}] {task.subject}"], cap=cap, page=1, again=""
            )

        result: str = await _write(work)
        return result

    @server.tool(annotations=WRITES, structured_output=False)
    async def job_submit(
        instruction: Annotated[str, Field(min_length=1, max_length=200_000)],
        piece: Annotated[str, Field(min_length=1, max_length=100)] = "default",
        session_id: SessionArg = None,
        files: Annotated[
            list[JobFileArg] | None,
            Field(
                description="Stored files (`fil_…`) copied into the job's input/ folder "
                "before it can run, each at its `path` there (as `POST /jobs` `files`)."
            ),
        ] = None,
    ) -> str:
        """Queue a job that runs a piece on an instruction (in a new session by default)."""
        caller = _current()
        entries = [job_files.Entry(file_id=f.file_id, path=f.path) for f in files or ()]
        try:
            placed = await job_files.check(
                caller.database, caller.runtime.settings, caller.tenant, entries
            )
        except DomainError as exc:
            raise ToolError(exc.detail) from exc
        job_id = new_id("job")

        async def work(db: AsyncSession, caller: Caller) -> str:
            found = caller.runtime.pieces.get(piece)
            if found is None:
                known = ", ".join(sorted(caller.runtime.pieces.pieces))
                raise ToolError(f"unknown piece {piece!r}; known: {known}")
            await caller.admission.admit_job(db, caller.tenant)
            await job_files.copy_in(caller.runtime.settings, job_id, placed)
            job = await submit_job(
                db,
                caller.tenant,
                instruction=instruction,
                piece=found,
                session_id=session_id,
                job_id=job_id,
            )
            return paged(_job_lines(job), cap=cap, page=1)

        result: str = await _write(work)
        return result

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def job_status(job_id: JobId, page: Page = 1) -> str:
        """A job's status, movement, error and result."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            job = await job_service.get_job(db, caller.tenant, job_id)
            return paged(_job_lines(job), cap=cap, page=page, again="call job_status again with")

        result: str = await _read(work)
        return result

    @server.tool(annotations=WRITES, structured_output=False)
    async def job_comment(
        job_id: JobId, body: Annotated[str, Field(min_length=1, max_length=100_000)]
    ) -> str:
        """Comment on a job; a job waiting for a human's answer resumes with it."""

        async def work(db: AsyncSession, caller: Caller) -> str:
            row = await comment_service.add_comment(db, caller.tenant, job_id, body)
            return paged([f"comment {row.id} on {job_id}"], cap=cap, page=1)

        result: str = await _write(work)
        return result


class McpEndpoint:
    """The ASGI app at `/mcp`: authenticates the caller as the REST routes do, then hands
    the request to the SDK's session manager (run by the application's lifespan)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A fresh server and session manager for the application's life (a manager runs once)."""
        server = build_server(self.settings)
        server.streamable_http_app(
            streamable_http_path=PATH,
            json_response=True,
            stateless_http=True,
            max_request_body_size=self.settings.max_body_bytes,
            # the application's site guard checks Host and Origin for every route
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = server.session_manager
        started, stop = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            # the manager's task group is entered and left in this one task, whichever
            # tasks start and end the application's lifespan
            async with manager.run():
                self._manager = manager
                started.set()
                try:
                    await stop.wait()
                finally:
                    self._manager = None

        task = asyncio.create_task(run(), name="mcp-session-manager")
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if task.done():
            task.result()  # it failed to start: raise why
        try:
            yield
        finally:
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = scope["app"]
        authenticator: Authenticator = app.state.authenticator
        database: Database = app.state.database
        try:
            tenant = await authenticator.tenant_for(database, _bearer(scope))
        except Unauthorized as exc:
            response = problem_response(
                401,
                exc.detail,
                slug=exc.slug,
                instance=scope.get("path"),
                headers=headers_of(exc),
            )
            await response(scope, receive, send)
            return
        manager = self._manager
        if manager is None:
            unavailable = problem_response(503, "the MCP server is not running", instance=PATH)
            await unavailable(scope, receive, send)
            return
        caller = Caller(tenant, database, self.settings, app.state.admission, app.state.runtime)
        token = _caller.set(caller)
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            _caller.reset(token)


def _bearer(scope: Scope) -> str | None:
    """The token of `Authorization: Bearer <token>`, if the request has one."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            header: str = value.decode("latin-1")
            scheme, _, token = header.partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None
