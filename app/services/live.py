"""Fan-out of live signals to this process's readers (and, on PostgreSQL, to every
process's, through `app.services.live_bridge`).

Durable events are read from the `events` table; this hub only wakes readers
when something was committed, and carries the transient signals (text deltas,
tool progress) that are not worth a row. A reader subscribes by key (a session, a
job, or everything) and gets only the signals of its keys: a signal costs the
readers of its session and job, not every open stream and waiting request.

What another process commits arrives through the bridge (PostgreSQL) or not at all
(SQLite): the process's one `run_clock` then ticks, and each tick asks every reader
that subscribed to ticks to look at the table once.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class LiveSignal:
    """`type` None means 'durable events were committed: read the table again' (with
    `ended`, one of them ended the job `job_id`, or the job is gone)."""

    type: str | None
    session_id: str | None = None
    job_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    ended: bool = False


CANCEL = "strata.cancel"
"""The type of a signal that asks the runner holding `job_id` to stop it (`LiveHub.cancel`):
carried between processes, never to a reader."""

TICK = LiveSignal(type=None)
"""The clock's safety tick: look at the table, something may have been committed elsewhere."""


class Bridge(Protocol):
    def publish(self, signal: LiveSignal) -> None: ...


class Subscription:
    """What one reader receives: the signals of its keys, in order. A signal that found
    the queue full is lost; a lost commit marks the subscription `missed`, so that the
    reader still reads the table once."""

    def __init__(self, *, maxsize: int, live: bool, ends_only: bool, ticks: bool) -> None:
        self.live = live
        self.ends_only = ends_only
        self.ticks = ticks
        self.missed = False
        self._queue: asyncio.Queue[LiveSignal] = asyncio.Queue(maxsize=maxsize)
        self._held: LiveSignal | None = None  # given back (`give_back`): the next one

    def wants(self, signal: LiveSignal) -> bool:
        if signal.type is not None:
            return self.live
        return signal.ended or not self.ends_only

    def put(self, signal: LiveSignal) -> None:
        if self._queue.full():  # a slow reader loses live signals, never durable events
            if signal.type is None:
                self.missed = True
            return
        self._queue.put_nowait(signal)

    def empty(self) -> bool:
        return self._held is None and self._queue.empty()

    def give_back(self, signal: LiveSignal) -> None:
        """`signal`, just taken, is the next one again (a reader that takes what is queued
        at once stops before a signal it must handle apart)."""
        self._held = signal

    async def next(self, seconds: float) -> LiveSignal | None:
        """The next signal, or None when `seconds` passed without one."""
        if self._held is not None:
            held, self._held = self._held, None
            return held
        if not self._queue.empty():
            return self._queue.get_nowait()
        if seconds <= 0:
            return None
        try:
            return await asyncio.wait_for(self._queue.get(), timeout=seconds)
        except TimeoutError:
            return None

    def take_missed(self) -> bool:
        missed, self.missed = self.missed, False
        return missed


class LiveHub:
    def __init__(self) -> None:
        self._by_session: dict[str, set[Subscription]] = {}
        self._by_job: dict[str, set[Subscription]] = {}
        self._everything: set[Subscription] = set()
        self._ticked: set[Subscription] = set()
        self.bridge: Bridge | None = None
        # hears the cancels other processes committed (`cancel`): this process's runner
        self.on_cancel: Callable[[str], None] | None = None

    @contextmanager
    def subscribe(
        self,
        *,
        session_id: str | None = None,
        job_id: str | None = None,
        everything: bool = False,
        live: bool = True,
        ends_only: bool = False,
        ticks: bool = False,
        maxsize: int = 1000,
    ) -> Iterator[Subscription]:
        """The signals of `session_id` and of `job_id` (either given), or of every
        session (`everything`); transient ones only when `live`; of the commits only
        those that ended the job when `ends_only`; and the clock's ticks when `ticks`."""
        if session_id is None and job_id is None and not everything:
            raise ValueError("a subscription names a session, a job or everything")
        subscription = Subscription(maxsize=maxsize, live=live, ends_only=ends_only, ticks=ticks)
        keyed: list[tuple[dict[str, set[Subscription]], str]] = []
        if session_id is not None:
            keyed.append((self._by_session, session_id))
        if job_id is not None:
            keyed.append((self._by_job, job_id))
        for index, key in keyed:
            index.setdefault(key, set()).add(subscription)
        if everything:
            self._everything.add(subscription)
        if ticks:
            self._ticked.add(subscription)
        try:
            yield subscription
        finally:
            for index, key in keyed:
                found = index.get(key)
                if found is not None:
                    found.discard(subscription)
                    if not found:
                        del index[key]
            self._everything.discard(subscription)
            self._ticked.discard(subscription)

    def committed(
        self, session_id: str | None = None, job_id: str | None = None, *, ended: bool = False
    ) -> None:
        self._publish(LiveSignal(type=None, session_id=session_id, job_id=job_id, ended=ended))

    def transient(self, type_: str, session_id: str, job_id: str, data: dict[str, Any]) -> None:
        self._publish(LiveSignal(type=type_, session_id=session_id, job_id=job_id, data=data))

    def cancel(self, job_id: str) -> None:
        """A cancel of `job_id` was committed here: the runners of the other processes
        sharing the database hear of it at once (PostgreSQL); this process's runner was
        told directly."""
        if self.bridge is not None:
            self.bridge.publish(LiveSignal(type=CANCEL, job_id=job_id))

    def tick(self) -> None:
        """The clock's safety tick, to this process's readers that asked for ticks."""
        for subscription in list(self._ticked):
            subscription.put(TICK)

    def _publish(self, signal: LiveSignal) -> None:
        self.offer(signal)
        if self.bridge is not None:
            self.bridge.publish(signal)

    def offer(self, signal: LiveSignal) -> None:
        """To this process's readers of the signal's session and job only; a cancel to
        its runner (`on_cancel`) and to no reader."""
        if signal.type == CANCEL:
            if self.on_cancel is not None and signal.job_id is not None:
                self.on_cancel(signal.job_id)
            return
        if signal.session_id is None and signal.job_id is None and signal.type is None:
            # a commit naming nobody: every reader looks, as at a tick
            targets = self._everything | self._ticked
        else:
            targets = set(self._everything)
            if signal.session_id is not None:
                targets |= self._by_session.get(signal.session_id, set())
            if signal.job_id is not None:
                targets |= self._by_job.get(signal.job_id, set())
        for subscription in targets:
            if subscription.wants(signal):
                subscription.put(signal)


Quiet = Callable[[], bool]
"""Whether nothing can have been committed by another writer since the last tick."""


async def run_clock(hub: LiveHub, seconds: float, quiet: Quiet, stop: asyncio.Event) -> None:
    """The process's one safety poll: every `seconds`, unless `quiet()`, every reader that
    subscribed to ticks looks at the table once (a commit of another process that no
    signal announced is seen within `seconds`)."""
    if not math.isfinite(seconds) or seconds <= 0:
        return
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=seconds)
            return
        except TimeoutError:
            pass
        if not quiet():
            hub.tick()
