"""Gives each request an id (its `X-Request-ID` when the client sent a sane one) and binds
it, with the session or job the path names, to the request's log lines; the response
carries the id back in `X-Request-ID`, so a client can quote it."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import context

REQUEST_ID_HEADER = "x-request-id"
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
_SESSION_PATH = re.compile(r"^/sessions/([A-Za-z0-9_-]{1,40})(?:/|$)")
_JOB_PATH = re.compile(r"^/jobs/([A-Za-z0-9_-]{1,40})(?:/|$)")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        path: str = scope.get("path", "")
        session = _SESSION_PATH.match(path)
        job = _JOB_PATH.match(path)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        with context.bound(
            request=request_id,
            session=session.group(1) if session else None,
            job=job.group(1) if job else None,
        ):
            await self.app(scope, receive, send_with_id)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == REQUEST_ID_HEADER.encode():
            candidate: str = value.decode("latin-1")
            if _CLIENT_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex
