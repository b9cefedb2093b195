"""The console's in-process client of the public API (`app.console.api.PublicApi`)."""

from __future__ import annotations

import asyncio
from typing import Any

from app.console.api import PublicApi


async def test_a_streamed_answer_waits_for_its_reader_once_the_buffer_is_full() -> None:
    """STRATA_CONSOLE_STREAM_BUFFER: an API answer streams into the console only as far
    as the buffer holds; it goes on as the reader reads, and nothing is lost."""
    sent: list[int] = []

    async def api(scope: Any, receive: Any, send: Any) -> None:
        head = [(b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        for n in range(20):
            await send({"type": "http.response.body", "body": b"%d," % n, "more_body": True})
            sent.append(n)
        await send({"type": "http.response.body", "body": b"end"})

    async with PublicApi(api, None, buffer=3).stream("GET", "/anything") as answer:
        for _ in range(10):  # the API runs as far as it can
            await asyncio.sleep(0)
        held = len(sent)
        body = b"".join([chunk async for chunk in answer.chunks()])

    assert held == 3
    assert body == b"".join(b"%d," % n for n in range(20)) + b"end"
