"""JSON bodies with numbers Strata cannot keep are refused with 422, for every route.

Python's `json` reads `NaN`, `Infinity` and `1e400` (as infinity), which are not JSON
(RFC 8259) and which the database then stores as null; and integers past 64 bits, which no
column and no PostgreSQL JSON serializer takes. Checking here, as the route reads its body,
covers every JSON body, typed fields and free-form ones (session metadata, hook payloads)
alike. Bodies without a suspect token (nearly all) cost one byte scan.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# NaN / Infinity literals, exponents of three digits or more, or 19+ digits in a row
_SUSPECT = re.compile(rb"NaN|Infinity|[eE][+-]?[0-9]{3}|[0-9]{19}")
INT64 = 2**63 - 1


class NonFiniteNumber(StarletteHTTPException):
    """An HTTPException, so that FastAPI's body parsing re-raises it as it is."""

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=422, detail=detail)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number (not finite)")
    return value


def _int64(text: str) -> int:
    value = int(text)
    if not -INT64 - 1 <= value <= INT64:
        raise ValueError(f"{text[:40]} is outside the 64-bit integer range")
    return value


def non_finite_problem(body: bytes) -> str | None:
    """Why the body is refused, or None (malformed JSON is left to the route to report)."""
    if not _SUSPECT.search(body):
        return None
    try:
        json.loads(body, parse_constant=_reject_constant, parse_float=_finite, parse_int=_int64)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            return None
        return f"body: {exc}; numbers must be finite, integers 64-bit"
    except RecursionError:
        return None
    return None


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return False


class StrictJSONMiddleware:
    def __init__(self, app: ASGIApp, *, own_checks: str | None = None) -> None:
        """`own_checks`: a pattern of the paths whose route checks its body itself
        (`app.api.hook_body`), so that a body of many megabytes is not held twice."""
        self.app = app
        self.own_checks = re.compile(own_checks) if own_checks else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        skip = self.own_checks is not None and self.own_checks.match(scope.get("path", ""))
        if scope["type"] != "http" or not _is_json(scope) or skip:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def checked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    problem = non_finite_problem(b"".join(chunks))
                    chunks.clear()
                    if problem is not None:
                        raise NonFiniteNumber(problem)
            return message

        await self.app(scope, checked_receive, send)
