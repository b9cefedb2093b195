"""After-commit signals: what a unit of work asks to happen once its change is durable.

A service that makes a change others wait for (a durable event, a queued job, a
webhook delivery) records a signal on its database session; the `Database` fires
the signals of a unit of work only after that unit committed, and drops them when
it rolls back. So no reader is ever woken for a change that then vanished, and no
route or service fires a signal by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_KEY = "strata.signals"


@dataclass(frozen=True)
class Notify:
    """Durable events of this session (and job) were committed: streams read again.
    `ended`: the job ended (or is gone), which is what a request waiting for it waits for."""

    session_id: str | None
    job_id: str | None = None
    ended: bool = False


@dataclass(frozen=True)
class WakeRunner:
    """A job may have become runnable (queued, re-queued, or its session freed)."""


@dataclass(frozen=True)
class WakeDispatcher:
    """A webhook delivery was queued."""


@dataclass(frozen=True)
class CancelJob:
    """A running job was asked to stop: a runner of this process that runs it stops it
    at once, one of another process too on PostgreSQL (`LiveHub.cancel`); on SQLite
    others see the flag at their next step or heartbeat."""

    job_id: str


@dataclass(frozen=True)
class Forget:
    """Rows a cache of this process holds changed (`app.db.caches`): drop `key` of `cache`
    (every key: None). The `Database` applies it itself, before any listener hears of it."""

    cache: str
    key: str | None = None


@dataclass(frozen=True, eq=False)
class Keep:
    """A value this unit of work made is what its rows are once it commits: `cache` keeps it
    under `key` (`app.db.caches`), unless something was forgotten there since `stamp`. A
    rollback drops it with the rest, so no cache holds what never committed."""

    cache: str
    key: str
    value: object
    stamp: int


Signal = Notify | WakeRunner | WakeDispatcher | CancelJob | Forget | Keep
Listener = Callable[[Signal], None]


def emit(db: Any, signal: Signal) -> None:
    """Record `signal` on the unit of work `db` (an ORM session) for after its commit."""
    pending: list[Signal] = db.info.setdefault(_KEY, [])
    if isinstance(signal, Notify):  # one per session and job, ended if any of them says so
        key = (signal.session_id, signal.job_id)
        for index, found in enumerate(pending):
            if isinstance(found, Notify) and (found.session_id, found.job_id) == key:
                if signal.ended and not found.ended:
                    pending[index] = signal
                return
    if signal not in pending:
        pending.append(signal)


def take(db: Any) -> list[Signal]:
    """The signals recorded on `db`, removed from it."""
    pending: list[Signal] = db.info.pop(_KEY, [])
    return pending
