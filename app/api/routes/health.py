from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from app.api.deps import SettingsDep, get_database
from app.api.errors import problem_response, problem_responses
from app.db.migrate import current_revision, head_revision

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
        "503 when the database is unreachable or behind. An unconfigured LLM is "
        "reported but does not make the server unready: everything else works."
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
    return Readiness(
        migration=current or "",
        llm="configured" if settings.llm_configured else "not_configured",
    )
