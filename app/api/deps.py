"""Annotated dependency aliases: the request's unit of work, settings, tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.domain.errors import Unauthorized
from app.domain.tool_policy import RuleBounds
from app.services.auth import Authenticator
from app.services.idempotency import IdempotentRequest, Replay, body_fingerprint, check_key
from app.services.limits import Admission, ByteBudget
from app.services.streams import Grant
from app.services.tool_policy import PolicyContext
from app.settings import Settings
from app.wiring import Runtime

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`")


# Dependencies are `async def` even when they await nothing: FastAPI runs a plain `def`
# dependency in its thread pool, a thread hand-off per dependency per request (the
# largest CPU cost of a request after the database's).
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


async def get_db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's read unit of work. A route that changes something hands its
    change to `Database.write` (one transaction on the writer, committed before the
    response), so no write lock is ever held across a route's awaits."""
    async with (await get_database(request)).read() as session:
        yield session


async def get_runtime(request: Request) -> Runtime:
    parts: Runtime = request.app.state.runtime
    return parts


def policy_bounds(runtime: Runtime) -> RuleBounds:
    """What a tenant's or a session's tool policy rules may name (this server's tools),
    and how many one layer may hold."""
    return RuleBounds(runtime.tools.names, runtime.settings.tool_policy_max_rules)


def policy_context(runtime: Runtime) -> PolicyContext:
    """What a session's effective tool policy is built from besides the database."""
    return PolicyContext(runtime.operator_policy, runtime.tools, runtime.pieces, runtime.settings)


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SessionDep = Annotated[AsyncSession, Depends(get_db_session, scope="function")]


BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def get_current_tenant(request: Request, credentials: BearerDep) -> str:
    """From the cache, or else a short read of its own (never a writer's lock)."""
    authenticator: Authenticator = request.app.state.authenticator
    token = credentials.credentials if credentials else None
    return await authenticator.tenant_for(await get_database(request), token)


CurrentTenant = Annotated[str, Depends(get_current_tenant)]


async def get_stream_grant(
    request: Request, credentials: BearerDep, tenant: CurrentTenant
) -> Grant:
    """What an event stream asks again, every STRATA_SSE_KEY_CHECK_SECONDS, about the key it
    was opened with."""
    authenticator: Authenticator = request.app.state.authenticator
    database = await get_database(request)
    token = credentials.credentials if credentials else None

    async def valid() -> bool:
        return await authenticator.still_grants(database, token, tenant)

    return Grant(valid, (await get_settings(request)).sse_key_check_seconds)


StreamGrant = Annotated[Grant, Depends(get_stream_grant)]


async def get_optional_tenant(request: Request, credentials: BearerDep) -> str | None:
    """The caller's tenant, or None for a caller without a valid key (never a 401): for
    routes that answer everyone but tell more to those who are known."""
    try:
        return await get_current_tenant(request, credentials)
    except Unauthorized:
        return None


async def get_admission(request: Request) -> Admission:
    admission: Admission = request.app.state.admission
    return admission


async def get_hook_body_budget(request: Request) -> ByteBudget:
    budget: ByteBudget = request.app.state.hook_body_budget
    return budget


# a route taking it documents 429 in its responses
AdmissionDep = Annotated[Admission, Depends(get_admission)]
HookBodyBudgetDep = Annotated[ByteBudget, Depends(get_hook_body_budget)]


async def page_limit(
    request: Request,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="Page size (server caps it).")
    ] = None,
) -> int:
    settings = await get_settings(request)
    return min(limit or settings.page_limit_default, settings.page_limit_max)


PageLimit = Annotated[int, Depends(page_limit)]
INT64_MAX = 2**63 - 1
_ULID = "[0-9A-HJKMNP-TV-Z]{26}"


def id_cursor(prefix: str) -> Any:
    """`after` of a list ordered by ids `<prefix>_<ULID>`: the schema says the form, so a
    client cannot build a cursor the server refuses (422)."""
    return Annotated[
        str | None,
        Query(
            description="`next_cursor` of the previous page.",
            pattern=f"^{prefix}_{_ULID}$",
            examples=[f"{prefix}_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"],
        ),
    ]


SessionCursor = id_cursor("ses")
JobCursor = id_cursor("job")
WebhookCursor = id_cursor("wh")
DeliveryCursor = id_cursor("msg")
FileCursor = id_cursor("fil")
ActionCursor = id_cursor("act")
SeqCursor = Annotated[
    str | None,
    Query(
        description="`next_cursor` of the previous page: the last `seq` seen.",
        pattern=r"^(0|[1-9][0-9]{0,17})$",
    ),
]


async def get_idempotency(
    request: Request,
    tenant: CurrentTenant,
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=255,
            pattern=r"\S",  # not blank
            description="Retry-safe writes: a retry with the same key and body returns the "
            "first answer and creates nothing (same key, other body: 422).",
        ),
    ] = None,
) -> IdempotentRequest:
    settings = await get_settings(request)
    key = check_key(key)
    return IdempotentRequest(
        tenant=tenant,
        key=key,
        method=request.method,
        path=request.url.path,
        # without a key nothing is stored, so the body needs no fingerprint
        body_hash=body_fingerprint(await request.body()) if key is not None else "",
        ttl_seconds=settings.idempotency_ttl_seconds,
    )


IdempotencyDep = Annotated[IdempotentRequest, Depends(get_idempotency)]


def replayed(replay: Replay) -> JSONResponse:
    return JSONResponse(
        replay.body, status_code=replay.status_code, headers={"Idempotent-Replayed": "true"}
    )


Location = Callable[[dict[str, Any]], str]


async def write_once(
    database: Database,
    idempotency: IdempotentRequest,
    status_code: int,
    work: Callable[[AsyncSession], Awaitable[BaseModel]],
    *,
    location: Location | None = None,
) -> object:
    """`work` and its `Idempotency-Key` row in one write transaction; a retry with the
    same key gets the first answer (replayed) and runs nothing. With `location`, the
    answer (first or replayed) carries `Location: location(body)`."""
    answer = await database.write(idempotency.once(status_code, work))
    if isinstance(answer, Replay):
        response = replayed(answer)
        body = answer.body
    elif location is None:
        return answer
    else:
        body = answer.model_dump(mode="json", by_alias=True)
        response = JSONResponse(body, status_code=status_code)
    if location is not None:
        response.headers["Location"] = location(body)
    return response
