"""The console's only way to Strata's data: the public HTTP API, called in process.

A request here is an ASGI request into the same application a socket request enters:
the same middleware (body limits), routing, validation, authentication (the signed-in
user's key as `Authorization: Bearer`) and problem documents. Nothing else is shared, so
the console sees exactly what an SDK user with that key sees, and can do nothing the
public API cannot. Responses stream (`stream`): an event stream or a download reaches the
browser as the API sends it, with its back-pressure, and ends when the browser leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode

from starlette.types import ASGIApp, Message

logger = logging.getLogger("strata.console")

# a name no resolver answers for (RFC 6761 `.invalid`): no page can make a browser send it
HOST = "strata.console.invalid"
_END: Message = {"type": "console.end"}


class ApiError(Exception):
    """The API answered with an error; `problem` is its problem document."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(str(problem.get("detail") or problem.get("title") or status))
        self.status = status
        self.problem = dict(problem)

    @property
    def detail(self) -> str:
        return str(self)


@dataclass(frozen=True)
class ApiResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def raise_for_status(self) -> ApiResponse:
        if self.status >= 400:
            try:
                problem = self.json()
            except ValueError:
                problem = {"detail": self.body.decode(errors="replace")}
            raise ApiError(self.status, problem if isinstance(problem, dict) else {})
        return self


class Streamed:
    """A response whose body arrives chunk by chunk."""

    def __init__(self, status: int, headers: dict[str, str], queue: asyncio.Queue[Message]):
        self.status = status
        self.headers = headers
        self._queue = queue

    def more_waiting(self) -> bool:
        """Whether another chunk has arrived already (a reader may batch its work)."""
        return not self._queue.empty()

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            message = await self._queue.get()
            if message is _END:
                return
            if message["type"] == "http.response.body":
                body: bytes = message.get("body", b"")
                if body:
                    yield body
                if not message.get("more_body", False):
                    return


class PublicApi:
    """The public API as the holder of `key` (None: no key, as on a keyless server), asked
    on behalf of the browser at `client` (its address is what the API's logs show).

    A streamed answer waits in a queue of `buffer` messages between the API and its
    reader (`STRATA_CONSOLE_STREAM_BUFFER`): a reader that falls behind stops the API's
    stream there instead of letting it pile up in memory."""

    def __init__(
        self,
        app: ASGIApp,
        key: str | None,
        client: tuple[str, int] | None = None,
        *,
        buffer: int,
    ) -> None:
        self._app = app
        self._key = key
        self._client = client
        self._buffer = buffer

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """One request, its whole answer read."""
        extra = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body).encode()
            extra.setdefault("content-type", "application/json")
        async with self.stream(method, path, params=params, body=body, headers=extra) as answer:
            content = b"".join([chunk async for chunk in answer.chunks()])
        return ApiResponse(answer.status, answer.headers, content)

    async def get(self, path: str, **params: Any) -> Any:
        """GET a JSON document; an error answer raises `ApiError`."""
        query = {k: v for k, v in params.items() if v is not None and v != ""}
        return (await self.request("GET", path, params=query)).raise_for_status().json()

    async def send(self, method: str, path: str, json_body: Any = None, **params: Any) -> Any:
        """A change with a JSON body (or none); an error answer raises `ApiError`."""
        answer = await self.request(method, path, params=params or None, json_body=json_body)
        answer.raise_for_status()
        return answer.json() if answer.body else None

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Streamed]:
        """Run the request and hand over its answer as soon as its head is sent; leaving
        the block tells the API the client is gone and stops it."""
        queue: asyncio.Queue[Message] = asyncio.Queue(maxsize=self._buffer)
        gone = asyncio.Event()
        task = asyncio.create_task(
            self._run(self._scope(method, path, params, body, headers), body, queue, gone)
        )
        try:
            head = await queue.get()
            if head is _END:
                raise RuntimeError(f"the API sent no answer to {method} {path}")
            answer_headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in head["headers"]}
            yield Streamed(int(head["status"]), answer_headers, queue)
        finally:
            gone.set()
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    def _scope(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        sent = {"host": HOST, **{k.lower(): v for k, v in (headers or {}).items()}}
        if self._key:
            sent["authorization"] = f"Bearer {self._key}"
        if body is not None:
            sent["content-length"] = str(len(body))
        return {
            "type": "http",
            # 2.3: a streaming response watches `receive` for the client leaving
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": unquote(path),
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": urlencode(params or {}, doseq=True).encode(),
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in sent.items()],
            "client": self._client,
            "server": (HOST, 80),
        }

    async def _run(
        self,
        scope: dict[str, Any],
        body: bytes | None,
        queue: asyncio.Queue[Message],
        gone: asyncio.Event,
    ) -> None:
        request_sent = False
        started = False

        async def receive() -> Message:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body or b"", "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            if message["type"] in ("http.response.start", "http.response.body"):
                await queue.put(message)

        try:
            await self._app(scope, receive, send)
        except Exception:
            # the app's own handlers answered what they could; one that fails after its
            # answer began is logged here, where nothing else would see it
            logger.exception("the API failed answering the console: %s", scope["path"])
            if not started:
                raise
        finally:
            with suppress(asyncio.QueueFull):
                queue.put_nowait(_END)
