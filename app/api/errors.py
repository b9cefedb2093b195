"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `type`.

No stack trace reaches a client: unexpected exceptions are logged with a
reference id and the client gets that id, not the exception text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.db.engine import TRANSIENT_ERRORS, is_transient
from app.domain.errors import (
    PROBLEM_PREFIX,
    Conflict,
    ContentTooLarge,
    DomainError,
    Forbidden,
    InvalidInput,
    NotFound,
    ServerBusy,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    UpstreamFailed,
)
from app.domain.ids import new_id

logger = logging.getLogger("strata.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX: Final = PROBLEM_PREFIX
_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

_SLUG_BY_STATUS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    429: "too-many-requests",
    500: "internal-error",
    502: "bad-gateway",
    503: "unavailable",
}


_STATUS_BY_ERROR: Final[dict[type[DomainError], int]] = {
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    ContentTooLarge: 413,
    UnsupportedMediaType: 415,
    InvalidInput: 422,
    TooManyRequests: 429,
    ServerBusy: 503,
    UpstreamFailed: 502,
}


def status_of(error: DomainError) -> int:
    """The HTTP status of a domain error: that of its nearest mapped class, else 400."""
    for cls in type(error).__mro__:
        if cls in _STATUS_BY_ERROR:
            return _STATUS_BY_ERROR[cls]
    return 400


def headers_of(error: DomainError) -> dict[str, str] | None:
    """The response headers a domain error's status calls for."""
    if isinstance(error, Unauthorized):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(error, TooManyRequests):
        return {"Retry-After": str(error.retry_after)}
    return None


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=[PROBLEM_PREFIX + "not-found"])
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldError] | None = None


def problem_response(
    status: int,
    detail: str,
    *,
    slug: str | None = None,
    title: str | None = None,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + (slug or _SLUG_BY_STATUS.get(status, "error")),
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    body.update({k: v for k, v in extensions.items() if v is not None})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def _field_name(loc: tuple[Any, ...]) -> str:
    """A field as a client writes it: `tool_policy[2].tool`, `metadata.project`."""
    name = ""
    for part in (p for p in loc if p not in ("body", "query", "path", "header")):
        name += f"[{part}]" if isinstance(part, int) else f"{'.' if name else ''}{part}"
    return name or ".".join(str(p) for p in loc)


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    return problem_response(
        status_of(exc),
        exc.detail,
        slug=exc.slug,
        title=exc.title,
        instance=request.url.path,
        headers=headers_of(exc),
        **exc.extensions,
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    named = "; ".join(f"{_field_name(tuple(e['loc']))}: {e['msg']}" for e in errors)
    return problem_response(
        422, named or "invalid request", instance=request.url.path, errors=errors
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
        # FastAPI's answer to a JSON body it cannot decode (not UTF-8, nested too deep):
        # malformed JSON like any other, which FastAPI itself answers with 422 json_invalid
        error = {"loc": ["body"], "msg": "JSON decode error", "type": "json_invalid"}
        detail = f"body: JSON decode error ({type(exc.__cause__).__name__})"
        return problem_response(422, detail, instance=request.url.path, errors=[error])
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed_methods(request)}
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    return problem_response(exc.status_code, detail, instance=request.url.path, headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path.

    Starlette's 405 names only the methods of the first route whose path matched,
    while a path such as /sessions/{id} is served by one route per method."""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in _HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    )


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """A database error, answered here rather than by Starlette's outermost middleware,
    which would raise it again for the server to log with its traceback: a transient one
    is a 503 the process's `Availability` has logged (once per outage), any other a 500."""
    if not is_transient(exc):
        return await _unexpected_error(request, exc)
    database = getattr(request.app.state, "database", None)
    known = database is not None and database.availability.down
    # an outage the database's units of work met is logged there, once
    logger.log(
        logging.DEBUG if known else logging.WARNING,
        "database unavailable on %s %s: %s",
        request.method,
        request.url.path,
        type(exc).__name__,
    )
    retry_after = request.app.state.settings.db_unavailable_retry_after_seconds
    return problem_response(
        503,
        "the database is busy or unreachable; retry the request",
        slug="database-unavailable",
        instance=request.url.path,
        headers={"Retry-After": str(retry_after)},
    )


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    reference = new_id("err")
    logger.exception("unhandled error %s on %s %s", reference, request.method, request.url.path)
    return problem_response(
        500,
        f"an internal error occurred; reference {reference}",
        instance=request.url.path,
        reference=reference,
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for transient in TRANSIENT_ERRORS:
        app.add_exception_handler(transient, _database_error)
    app.add_exception_handler(Exception, _unexpected_error)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries so generated SDKs know every error's shape."""
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
