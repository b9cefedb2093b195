from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from app.api.deps import SettingsDep, get_database
from app.api.errors import problem_response, problem_responses
from app.db.migrate import current_revision, head_revision
from app.settings import Settings
from app.wiring import Runtime

router = APIRouter(tags=["health"])
logger = logging.getLogger("strata.health")


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready"] = "ready"
    database: Literal["ok"] = "ok"
    migration: str
    llm: Literal["configured", "not_configured"]


@router.get("/healthz", name="healthz", summary="The process is up")
async def healthz() -> Health:
    return Health()


@router.get(
    "/readyz",
    name="readyz",
    summary="The database is reachable and migrated to head",
    description=(
        "503 when the database is unreachable or behind, or when this process's job "
        "runner or webhook dispatcher has stopped coming round (`background-stalled`, "
        "naming which). An unconfigured LLM is reported but does not make the server "
        "unready: everything else works."
    ),
    responses=problem_responses(503),
    response_model=Readiness,
)
async def readyz(request: Request, settings: SettingsDep) -> object:
    head = head_revision()
    try:
        async with get_database(request).read() as db:
            current = await current_revision(db)
    except Exception as exc:
        logger.warning("readiness check: database unreachable: %s", type(exc).__name__)
        return problem_response(503, "the database is unreachable", slug="database-unavailable")
    if current != head:
        return problem_response(
            503,
            f"the database is at migration {current!r}, this server needs {head!r}",
            slug="migrations-pending",
        )
    stalled = stalled_loops(request.app.state.runtime, settings)
    if stalled:
        logger.warning("readiness check: %s not ticking", ", ".join(stalled))
        return problem_response(
            503,
            f"background loop not ticking: {', '.join(stalled)}",
            slug="background-stalled",
            stalled=stalled,
        )
    return Readiness(
        migration=current or "",
        llm="configured" if settings.llm_configured else "not_configured",
    )


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
