"""How the runner and the webhook dispatcher wait when there is nothing to do."""

from __future__ import annotations

import asyncio


async def idle(wake: asyncio.Event, stop: asyncio.Event, seconds: float) -> None:
    """Until woken (new work was committed here), stopped, or `seconds` passed (work
    committed by another process is only seen by polling)."""
    wake.clear()
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
