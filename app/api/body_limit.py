"""Refuse request bodies over a limit with 413, before they fill memory.

Declared sizes are refused before the app runs; chunked bodies are counted as
they stream in. Limits are per path pattern so an endpoint such as a transcript
hook or a file upload can accept more than the default.
"""

from __future__ import annotations

import json
import re

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import PROBLEM_MEDIA_TYPE, TYPE_PREFIX


class _TooLarge(StarletteHTTPException):
    """An HTTPException so that FastAPI's body parsing re-raises it as it is."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=_detail(limit))


class BodyLimitMiddleware:
    def __init__(
        self, app: ASGIApp, *, default_limit: int, path_limits: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.default_limit = default_limit
        self.path_limits = [(re.compile(p), limit) for p, limit in (path_limits or {}).items()]

    def limit_for(self, path: str) -> int:
        """The first pattern (a regular expression) that matches the path decides."""
        for pattern, limit in self.path_limits:
            if pattern.match(path):
                return limit
        return self.default_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _send_413(send, scope["path"], limit)
            return

        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if started:
                raise
            await _send_413(send, scope["path"], limit)


def _detail(limit: int) -> str:
    return f"the request body is larger than this endpoint's limit of {limit} bytes"


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_413(send: Send, path: str, limit: int) -> None:
    body = json.dumps(
        {
            "type": TYPE_PREFIX + "payload-too-large",
            "title": "Content Too Large",
            "status": 413,
            "detail": _detail(limit),
            "instance": path,
            "limit": limit,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
