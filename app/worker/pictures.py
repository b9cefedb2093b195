"""The session pictures this process's chat turns hand to each other.

A turn's job loads its session's segment and task list once and keeps them current
(`app.worker.job_session`). Loading both again from the log would parse every item of the
segment, at one-request turns the largest part of a turn's own work; so a turn that ends
leaves what it held here, and the session's next turn in this process takes it and
reads only what the log gained since;
with it go the request messages the turn built from that segment, so the next turn builds
only its new items' (`app.engine.requests.Conversation`).

A picture is taken, not shared: its one owner changes its task list in place. It is
kept `STRATA_JOB_SESSION_CACHE_SECONDS` at most, and at most
`STRATA_JOB_SESSION_CACHE_ENTRIES` of them holding `STRATA_JOB_SESSION_CACHE_ITEMS` items
in all, the oldest going first (a session's segment grows with every turn until it is
compacted, so a bound on entries alone lets the pictures grow with the sessions); a miss
only costs the read it saves.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.db.caches import Miss, TtlCache
from app.settings import Settings
from app.worker.job_session import Picture


class SessionPictures:
    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` (seconds) times the pictures."""
        self._kept: TtlCache[str, Picture] = TtlCache(
            settings.job_session_cache_seconds,
            max_entries=settings.job_session_cache_entries,
            clock=clock,
            weigh=_items_held,
            max_weight=settings.job_session_cache_items,
        )

    def take(self, session_id: str) -> Picture | None:
        found = self._kept.take(session_id)
        return None if isinstance(found, Miss) else found

    def keep(self, session_id: str, picture: Picture | None) -> None:
        if picture is not None:
            self._kept.put(session_id, picture, self._kept.stamp())

    @property
    def items(self) -> int:
        """The items the kept pictures hold in all."""
        return self._kept.weight

    def __len__(self) -> int:
        return len(self._kept)


def _items_held(picture: Picture) -> int:
    return len(picture.items)
