"""A session's or job's event stream one event at a time, as the tests read it: the
batches `app.services.streams.event_batches` yields (what the route writes in one
piece each), flattened."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from app.services.streams import StreamEvent, event_batches


async def event_stream(*args: Any, **kwargs: Any) -> AsyncGenerator[StreamEvent | None, None]:
    """`event_batches(*args, **kwargs)`, one event at a time (None: a keep-alive)."""
    batches = event_batches(*args, **kwargs)
    async with aclosing(batches):
        async for batch in batches:
            if batch is None:
                yield None
                continue
            for event in batch:
                yield event
