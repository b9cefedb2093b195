from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, Field

import app as app_package
from app.api.deps import BearerDep, SettingsDep, get_database, get_optional_tenant
from app.api.errors import problem_response, problem_responses
from app.db.migrate import current_revision, head_revision
from app.settings import Settings
from app.wiring import Runtime

router = APIRouter(tags=["health"])
logger = logging.getLogger("strata.health")


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str = Field(description="Strata's version", examples=["0.1.0"])


class Readiness(BaseModel):
    """The details (`database`, `migration`, `llm`) only for callers with a valid key (or
    any caller of a keyless server): they tell an outsider what runs here."""

    status: Literal["ready"]
    database: Literal["ok"] | None = None
    migration: str | None = None
    llm: Literal["configured", "not_configured"] | None = None


@router.get(
    "/healthz",
    name="healthz",
    summary="The process is up",
    description=(
        "Answers 200 with the server's version whenever the process serves HTTP, "
        "without touching the database or needing a key: a liveness probe. "
        "`/readyz` says whether it can work."
    ),
)
async def healthz() -> Health:
    return Health(version=app_package.__version__)


@router.get(
    "/readyz",
    name="readyz",
    summary="The database is reachable and migrated to head",
    description=(
        "503 when the database is unreachable or behind, or when this process's job "
        "runner or webhook dispatcher has stopped coming round (`background-stalled`, "
        "naming which). An unconfigured LLM is reported but does not make the server "
        "unready: everything else works. Without a valid key (on a server that has keys) "
        "the answer is the status alone: no migration id, LLM state or loop names."
    ),
    responses=problem_responses(503),
    response_model=Readiness,
    response_model_exclude_none=True,
)
async def readyz(request: Request, settings: SettingsDep, credentials: BearerDep) -> object:
    head = head_revision()
    database = await get_database(request)
    try:
        async with database.read() as db:
            current = await current_revision(db)
    except Exception as exc:
        # an outage the read met is logged once, by the database's `availability`
        level = logging.DEBUG if database.availability.down else logging.WARNING
        logger.log(level, "readiness check: database unreachable: %s", type(exc).__name__)
        return problem_response(503, "the database is unreachable", slug="database-unavailable")
    if current != head:
        # the key table may not exist yet, so no caller is known: the ids go to the log
        logger.warning("readiness check: database at %r, this server needs %r", current, head)
        return problem_response(
            503,
            "the database is not migrated to this server's version; `strata migrate` does it",
            slug="migrations-pending",
        )
    detailed = await _known_caller(request, credentials)
    stalled = stalled_loops(request.app.state.runtime, settings)
    if stalled:
        logger.warning("readiness check: %s not ticking", ", ".join(stalled))
        return problem_response(
            503,
            f"background loop not ticking: {', '.join(stalled)}"
            if detailed
            else "a background loop is not ticking",
            slug="background-stalled",
            stalled=stalled if detailed else None,
        )
    if not detailed:
        return Readiness(status="ready")
    return Readiness(
        status="ready",
        database="ok",
        migration=current or "",
        llm="configured" if settings.llm_configured else "not_configured",
    )


async def _known_caller(request: Request, credentials: HTTPAuthorizationCredentials | None) -> bool:
    """A valid key, or a keyless server (where everyone is the local tenant)."""
    try:
        return await get_optional_tenant(request, credentials) is not None
    except Exception:  # the key table cannot be read: say no more than to a stranger
        return False


def stalled_loops(runtime: Runtime, settings: Settings) -> list[str]:
    """The background loops of this process that have not come round for a while: the
    job runner (`runner`) and the webhook dispatcher (`webhooks`). A loop waits at most a
    poll interval (longer while it backs off from a database outage) between turns."""
    now = asyncio.get_running_loop().time()
    loops = {"runner": runtime.runner, "webhooks": runtime.dispatcher}
    return [
        name
        for name, loop in loops.items()
        if loop is not None
        and loop.ticked_at is not None
        and now - loop.ticked_at > settings.background_stall_seconds
    ]
