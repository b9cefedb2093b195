"""A chain's turns newest first, read a batch at a time: what the memory block consumes.

A chain's turns are owned by several sessions (its predecessors and the sessions merged into
them). Reading them all to take the newest would be the whole cost of the block for a long
chain. `NewestTurns` merges one newest-first index range per owner instead, lazily: an owner
is only read once its newest unread turn can be the next one overall (the owner's last end
time, known beforehand, bounds it), so a chain whose sessions follow each other in time reads
about as many rows as the block shows, from one or two sessions.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from app.db.repositories.memory import Holder, MemoryRepository, NewestText

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_ID = 2**63  # above every id: the upper bound of an owner not read yet


def _key(at: datetime, turn_id: int) -> tuple[int, int]:
    """A max-heap key (negated) for the order newest first: by end time, then id."""
    return (-((at - _EPOCH) // timedelta(microseconds=1)), -turn_id)


@dataclass
class _Owner:
    holder: Holder
    buffer: deque[NewestText] = field(default_factory=deque)
    position: tuple[datetime, int] | None = None  # the keyset after the last row read
    exhausted: bool = False


class NewestTurns:
    """Turns of the given owners newest first. The first `window` come with texts cut to
    `wide` characters (they may be shown whole), later ones to `narrow` (one-line summaries)."""

    def __init__(
        self,
        repo: MemoryRepository,
        last_ended: dict[Holder, datetime],
        *,
        window: int,
        wide: int,
        narrow: int,
        batch: int = 64,
    ) -> None:
        self.repo = repo
        self.window = window
        self.wide = wide
        self.narrow = narrow
        self.batch = batch
        self.yielded = 0
        self._heap: list[tuple[tuple[int, int], int, _Owner]] = []
        for order, (holder, last) in enumerate(last_ended.items()):
            heapq.heappush(self._heap, (_key(last, _NO_ID), order, _Owner(holder)))

    @property
    def exhausted(self) -> bool:
        """Whether every turn has been handed out."""
        return not self._heap

    async def next(self) -> NewestText | None:
        """The next turn, newest first; None when there are no more."""
        while self._heap:
            _, order, owner = heapq.heappop(self._heap)
            if not owner.buffer:
                if owner.exhausted or not await self._fill(owner):
                    continue
                head = owner.buffer[0]
                heapq.heappush(self._heap, (_key(head.ended_at, head.id), order, owner))
                continue  # its true head may be older than another owner's bound
            row = owner.buffer.popleft()
            self.yielded += 1
            following = owner.buffer[0] if owner.buffer else row  # an upper bound when empty
            if owner.buffer or not owner.exhausted:
                heapq.heappush(self._heap, (_key(following.ended_at, following.id), order, owner))
            return row
        return None

    async def _fill(self, owner: _Owner) -> bool:
        """Read the owner's next batch: the rows still wanted wide, then a batch of narrow
        ones, in one query."""
        wanted = max(self.window - self.yielded, 0)
        limit = wanted + self.batch
        rows = await self.repo.newest_texts(
            owner.holder,
            before=owner.position,
            limit=limit,
            max_chars=self.narrow,
            wide_rows=wanted,
            wide_chars=self.wide,
        )
        owner.buffer.extend(rows)
        owner.exhausted = len(rows) < limit
        if rows:
            owner.position = (rows[-1].ended_at, rows[-1].id)
        return bool(rows)
