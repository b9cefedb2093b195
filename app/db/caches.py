"""Short-lived copies of rows that are read far more often than they change.

Each request resolves its API key and each job status change looks up the tenant's
webhook subscriptions; both rarely change. A `TtlCache` keeps what was read for a
few seconds. A service that changes such rows calls `forget(db, CACHE, key)`:

* the entry goes at once, so the rest of the unit of work (and every later unit in
  this process) reads again;
* it goes again when the unit of work commits (the `Forget` after-commit signal, which
  the `Database` applies itself, on the thread that committed), so a read that raced
  the change cannot keep the old rows: a value is stored only if nothing was forgotten
  since its read began (`stamp` / `put`).

A value a unit of work changes with what it writes itself (a session's view of its log,
`SESSION_VIEWS`, as of the item it appends) is taken out with `take` and given back with
`keep`: the `Keep` after-commit signal stores it once the unit committed, and a rollback
drops it. Such an entry carries the state it belongs to (the log's end), so a reader
checks it against what it read and no other writer needs to forget it.

Other processes see a change once their copy expires, after the TTL at most. The
`Database` owns one `Caches` and hands it to every unit of work (`caches_of(db)`);
a session from elsewhere has none, and its callers read the database every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from app.db import signals

K = TypeVar("K")
V = TypeVar("V")

API_KEYS: Final = "api_keys"
WEBHOOKS: Final = "webhooks"
SESSION_VIEWS: Final = "session_views"
_KEY = "strata.caches"


class Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Final = Miss()


class TtlCache(Generic[K, V]):
    """Values kept `ttl` seconds, at most `max_entries` of them (the oldest go first).

    With `weigh`, the values' weights (`weigh(value)`, say the items a value holds) add
    up to `max_weight` at most, the oldest going first, and a value heavier than that
    alone is not kept: the bound is on what the entries hold, not only on their number.

    Used from the event loop and from SQLite's writer thread, hence the lock."""

    def __init__(
        self,
        ttl: float,
        *,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
        weigh: Callable[[V], int] | None = None,
        max_weight: int = 0,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max(1, max_entries)
        self.max_weight = max_weight
        self._weigh = weigh
        self._clock = clock
        # key: (expires, value, weight)
        self._entries: dict[K, tuple[float, V, int]] = {}
        self.weight = 0  # of the entries held
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | Miss:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return MISS
            if self._clock() >= entry[0]:
                self._drop(key)
                return MISS
            return entry[1]

    def take(self, key: K) -> V | Miss:
        """`get`, and the entry goes: its value has one owner, who may change it."""
        with self._lock:
            entry = self._drop(key)
            if entry is None or self._clock() >= entry[0]:
                return MISS
            return entry[1]

    def stamp(self) -> int:
        """Taken before reading what `put` stores."""
        with self._lock:
            return self._generation

    def put(self, key: K, value: V, stamp: int) -> None:
        """Keep `value`, unless something was forgotten since `stamp` (the read may have
        raced that change) or the TTL is zero."""
        with self._lock:
            if stamp != self._generation or self.ttl <= 0:
                return
            self._drop(key)
            weight = 0 if self._weigh is None else self._weigh(value)
            if self._weigh is not None and weight > self.max_weight:
                return
            self._evict(weight)
            self._entries[key] = (self._clock() + self.ttl, value, weight)
            self.weight += weight

    def forget(self, key: K | None = None) -> None:
        """Drop `key` (every key: None)."""
        with self._lock:
            self._generation += 1
            if key is None:
                self._entries.clear()
                self.weight = 0
            else:
                self._drop(key)

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, key: K) -> tuple[float, V, int] | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.weight -= entry[2]
        return entry

    def _evict(self, weight: int) -> None:
        """Make room for one more entry of `weight`: the expired go, then the oldest."""
        if not self._full(weight):
            return
        now = self._clock()
        for key in [k for k, (expires, _, _) in self._entries.items() if now >= expires]:
            self._drop(key)
        while self._entries and self._full(weight):
            self._drop(next(iter(self._entries)))  # the oldest stored

    def _full(self, weight: int) -> bool:
        """No room for one more entry of `weight`."""
        if len(self._entries) >= self.max_entries:
            return True
        return self._weigh is not None and self.weight + weight > self.max_weight


@dataclass(frozen=True)
class Weighed:
    """A cache of values that hold `items` (a session's view of its log), bounded by the
    items they hold in all as well as by their number."""

    ttl: float
    max_entries: int
    max_items: int


def _items_held(value: Any) -> int:
    return len(value.items)


class Caches:
    """This process's caches by name (`API_KEYS`, `WEBHOOKS`, `SESSION_VIEWS`)."""

    def __init__(
        self,
        ttls: Mapping[str, float],
        *,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
        weighed: Mapping[str, Weighed] | None = None,
    ) -> None:
        self._caches: dict[str, TtlCache[Any, Any]] = {
            name: TtlCache(ttl, max_entries=max_entries, clock=clock) for name, ttl in ttls.items()
        }
        for name, bound in (weighed or {}).items():
            self._caches[name] = TtlCache(
                bound.ttl,
                max_entries=bound.max_entries,
                clock=clock,
                weigh=_items_held,
                max_weight=bound.max_items,
            )

    def __getitem__(self, name: str) -> TtlCache[Any, Any]:
        return self._caches[name]

    def apply(self, fired: Iterable[signals.Signal]) -> None:
        """Forget what committed units of work changed, keep what they made."""
        for signal in fired:
            if isinstance(signal, signals.Forget):
                self._caches[signal.cache].forget(signal.key)
            elif isinstance(signal, signals.Keep):
                self._caches[signal.cache].put(signal.key, signal.value, signal.stamp)


def attach(db: Any, caches: Caches) -> None:
    """Hand `caches` to the unit of work `db` (an ORM session)."""
    db.info[_KEY] = caches


def caches_of(db: Any) -> Caches | None:
    caches: Caches | None = db.info.get(_KEY)
    return caches


def forget(db: Any, cache: str, key: str | None = None) -> None:
    """`db` changes what `cache` holds under `key` (every key: None): forget it now and
    when `db` commits."""
    caches = caches_of(db)
    if caches is not None:
        caches[cache].forget(key)
    signals.emit(db, signals.Forget(cache, key))


def take(db: Any, cache: str, key: str) -> Any:
    """What `cache` holds under `key`, taken out of it; None when it holds nothing (or `db`
    has no caches)."""
    caches = caches_of(db)
    value = MISS if caches is None else caches[cache].take(key)
    return None if isinstance(value, Miss) else value


def keep(db: Any, cache: str, key: str, value: object) -> None:
    """`cache` keeps `value` under `key` once `db` commits (nothing if it rolls back)."""
    caches = caches_of(db)
    if caches is not None:
        signals.emit(db, signals.Keep(cache, key, value, caches[cache].stamp()))
