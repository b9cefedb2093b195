"""The console's in-process client of the public API (`app.console.api.PublicApi`)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from starlette.requests import Request

from app.console.api import PublicApi
from app.console.web import api_as
from app.settings import Settings


class _Streaming:
    """An API whose answer is 20 chunks and an end; it counts the chunks it got out."""

    def __init__(self, settings: Settings) -> None:
        self.state = SimpleNamespace(settings=settings)
        self.sent: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        head = [(b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        for n in range(20):
            await send({"type": "http.response.body", "body": b"%d," % n, "more_body": True})
            self.sent.append(n)
        await send({"type": "http.response.body", "body": b"end"})


async def _held(api: PublicApi, sent: list[int]) -> tuple[int, bytes]:
    """How many chunks the API got out before anybody read, and the whole answer."""
    async with api.stream("GET", "/anything") as answer:
        for _ in range(10):  # the API runs as far as it can
            await asyncio.sleep(0)
        held = len(sent)
        return held, b"".join([chunk async for chunk in answer.chunks()])


WHOLE = b"".join(b"%d," % n for n in range(20)) + b"end"


async def test_a_streamed_answer_waits_for_its_reader_once_the_buffer_is_full() -> None:
    """An API answer streams into the console only as far as the buffer holds; it goes on
    as the reader reads, and nothing is lost."""
    app = _Streaming(Settings(_env_file=None))

    assert await _held(PublicApi(app, None, buffer=3), app.sent) == (3, WHOLE)


async def test_the_consoles_api_client_buffers_as_the_settings_say() -> None:
    """STRATA_CONSOLE_STREAM_BUFFER reaches the client a console route asks the API with."""
    app = _Streaming(Settings(_env_file=None, console_stream_buffer=5))
    request = Request({"type": "http", "app": app, "headers": [], "client": ("127.0.0.1", 9)})

    assert await _held(api_as(request, None), app.sent) == (5, WHOLE)
