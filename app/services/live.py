"""Fan-out of live signals to this process's readers (and, on PostgreSQL, to every
process's, through `app.services.live_bridge`).

Durable events are read from the `events` table; this hub only wakes readers
when something was committed, and carries the transient signals (text deltas,
tool progress) that are not worth a row. Without a bridge readers also poll, so a
runner in another process is seen too, just later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class LiveSignal:
    """`type` None means 'durable events were committed: read the table again'."""

    type: str | None
    session_id: str | None = None
    job_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


class Bridge(Protocol):
    def publish(self, signal: LiveSignal) -> None: ...


class LiveHub:
    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[LiveSignal]] = set()
        self.bridge: Bridge | None = None

    @property
    def cross_process(self) -> bool:
        """Whether other processes' signals arrive here (then readers need not poll)."""
        return self.bridge is not None

    @contextmanager
    def subscribe(self, maxsize: int = 1000) -> Iterator[asyncio.Queue[LiveSignal]]:
        queue: asyncio.Queue[LiveSignal] = asyncio.Queue(maxsize=maxsize)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)

    def committed(self, session_id: str | None = None, job_id: str | None = None) -> None:
        self._publish(LiveSignal(type=None, session_id=session_id, job_id=job_id))

    def transient(self, type_: str, session_id: str, job_id: str, data: dict[str, Any]) -> None:
        self._publish(LiveSignal(type=type_, session_id=session_id, job_id=job_id, data=data))

    def _publish(self, signal: LiveSignal) -> None:
        self.offer(signal)
        if self.bridge is not None:
            self.bridge.publish(signal)

    def offer(self, signal: LiveSignal) -> None:
        """To this process's readers only."""
        for queue in list(self._queues):
            if queue.full():  # a slow reader loses live signals, never durable events
                continue
            queue.put_nowait(signal)
