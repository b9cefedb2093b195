from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from fastapi import APIRouter, Request, Response

from app.api.deps import (
    AdmissionDep,
    CurrentTenant,
    DatabaseDep,
    HookBodyBudgetDep,
    SettingsDep,
)
from app.api.errors import problem_responses
from app.api.hook_body import literal_lines, parse_hook, read_body
from app.api.schemas.hooks import ClaudeCodeHook, HookAnswer, HookSpecificOutput
from app.db.engine import Database
from app.domain.errors import Forbidden, InvalidInput
from app.memory.render import DetailHint
from app.services.claude_code import (
    HookSource,
    ingest_transcript,
    session_start,
    start_context,
    write_mirrored,
)
from app.services.limits import Admission
from app.settings import Settings

router = APIRouter(prefix="/hooks", tags=["hooks"], responses=problem_responses(401, 503))

TRANSCRIPT_EVENTS = frozenset({"Stop", "SubagentStop"})


def _transcript_file(settings: Settings, hook: ClaudeCodeHook) -> Path | None:
    """Only for a server on the same machine, only when a setting allows it, and only files
    under the configured roots (`STRATA_HOOK_TRANSCRIPT_ROOTS`, `~/.claude/projects`): an
    API client must not make the server read whatever file it names (403 otherwise; the
    path is resolved first, so neither `..` nor a symlink leads out)."""
    path_text = hook.agent_transcript_path if hook.hook_event_name == "SubagentStop" else None
    path_text = path_text or hook.transcript_path
    if not settings.hook_read_transcript_path or not path_text:
        return None
    path = Path(path_text).expanduser().resolve()
    if not any(path.is_relative_to(root) for root in settings.transcript_roots):
        raise Forbidden(
            "transcript_path is outside the folders the server reads transcripts from "
            "(STRATA_HOOK_TRANSCRIPT_ROOTS)",
            field="transcript_path",
        )
    if not path.is_file():
        raise InvalidInput(
            f"transcript_path {path_text!r} is not a readable file", field="transcript_path"
        )
    if path.stat().st_size > settings.hook_max_body_bytes:
        raise InvalidInput("the transcript file is larger than STRATA_HOOK_MAX_BODY_BYTES")
    return path


def _file_lines(path: Path) -> Iterator[str]:
    """The file's lines, read one at a time (split at "\n" only)."""
    with path.open("rb") as file:
        for raw in file:
            yield raw.removesuffix(b"\n").decode("utf-8", errors="replace")


@router.post(
    "/claude-code",
    name="claude_code",
    summary="Take a Claude Code hook payload",
    description=(
        "`Stop` / `SubagentStop`: the new transcript lines (`transcript`, JSONL) are imported "
        "into the mirrored session idempotently (by entry uuid / tool_use id) and projected "
        "into memory, in transactions of at most `STRATA_IMPORT_CHUNK_ITEMS` items: if the "
        "answer is an error, what was committed stays and posting the same lines again "
        "finishes the import. Malformed lines are skipped and reported in `systemMessage`. "
        "A session first seen by any of these hooks continues the newest session of its "
        "project (`cwd`, or the kit's `project_root`) that nothing continues yet; items for "
        "a session merged away land in its target. `SessionStart` answers the memory block "
        "(at most `STRATA_MEMORY_BLOCK_MAX_CHARS`) as `hookSpecificOutput.additionalContext`. "
        "With `STRATA_HOOK_READ_TRANSCRIPT_PATH` the server may read `transcript_path` "
        "itself, only under `STRATA_HOOK_TRANSCRIPT_ROOTS` (403 otherwise). "
        "Other events are accepted and ignored. "
        "The answer's `Strata-Session` header names the mirrored session. An import is "
        "refused with 429 and `Retry-After` while the tenant has "
        "STRATA_TENANT_MAX_ACTIVE_JOBS jobs queued or running (imports running count "
        "too); a body that would take the process past STRATA_HOOK_BODY_BUDGET_BYTES of "
        "hook bodies at once gets 503 `server-busy` with `Retry-After`."
    ),
    response_model_exclude_none=True,
    responses=problem_responses(403, 413, 422, 429),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ClaudeCodeHook"}}
            },
        }
    },
)
async def claude_code(
    request: Request,
    response: Response,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    admission: AdmissionDep,
    budget: HookBodyBudgetDep,
) -> HookAnswer:
    with budget.claim() as claim:
        body = await read_body(request, claim)
        hook, span = parse_hook(body, ClaudeCodeHook)
        lines: Callable[[], Iterator[str]] | None = None
        if span is not None:
            lines = partial(literal_lines, body, *span)
        return await _answer(hook, lines, response, database, tenant, settings, admission)


async def _answer(
    hook: ClaudeCodeHook,
    lines: Callable[[], Iterator[str]] | None,
    response: Response,
    database: Database,
    tenant: str,
    settings: Settings,
    admission: Admission,
) -> HookAnswer:
    source = HookSource(session_id=hook.session_id, cwd=hook.cwd, project_root=hook.project_root)
    if hook.hook_event_name == "SessionStart":
        session = await write_mirrored(database, lambda db: session_start(db, tenant, source))
        async with database.read() as db:
            hint = DetailHint.of_kit(hook.kit_mode, hook.kit_mcp)
            text = await start_context(db, settings, tenant, session.id, hint)
        response.headers["Strata-Session"] = session.id
        return HookAnswer(
            hookSpecificOutput=HookSpecificOutput(
                hookEventName="SessionStart", additionalContext=text
            )
        )
    if hook.hook_event_name not in TRANSCRIPT_EVENTS:
        return HookAnswer()
    if lines is None:
        path = await asyncio.to_thread(_transcript_file, settings, hook)
        if path is not None:
            lines = partial(_file_lines, path)
    if lines is None:
        raise InvalidInput(
            "no transcript lines: send them as `transcript` (or enable "
            "STRATA_HOOK_READ_TRANSCRIPT_PATH on a server on the same machine)",
            field="transcript",
        )
    async with admission.import_slot(database, tenant):
        report = await ingest_transcript(
            database, settings, tenant, source, lines, first_line=hook.transcript_first_line
        )
    response.headers["Strata-Session"] = report.session_id
    response.headers["Strata-Imported"] = str(report.imported)
    response.headers["Strata-Already-Known"] = str(report.already_known)
    if not report.problems:
        return HookAnswer()
    shown = "; ".join(f"line {p.line}: {p.reason}" for p in report.problems[:5])
    more = f" (and {len(report.problems) - 5} more)" if len(report.problems) > 5 else ""
    return HookAnswer(
        systemMessage=f"Strata skipped {len(report.problems)} transcript lines: {shown}{more}"
    )
