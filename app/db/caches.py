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

A value a unit of work builds from what it writes itself (a session's task list, as of
the item it appends) is taken out with `take` and given back with `keep`: the `Keep`
after-commit signal stores it once the unit committed, and a rollback drops it. Such
an entry carries the state it belongs to (the log's end), so a reader checks it against
what it read and no other writer needs to forget it.

Other processes see a change once their copy expires, after the TTL at most. The
`Database` owns one `Caches` and hands it to every unit of work (`caches_of(db)`);
a session from elsewhere has none, and its callers read the database every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Generic, TypeVar

from app.db import signals

K = TypeVar("K")
V = TypeVar("V")

API_KEYS: Final = "api_keys"
WEBHOOKS: Final = "webhooks"
TASK_STORES: Final = "task_stores"
_KEY = "strata.caches"


class Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Final = Miss()


class TtlCache(Generic[K, V]):
    """Values kept `ttl` seconds, at most `max_entries` of them (the oldest go first).

    Used from the event loop and from SQLite's writer thread, hence the lock."""

    def __init__(
        self, ttl: float, *, max_entries: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.max_entries = max(1, max_entries)
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | Miss:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return MISS
            expires, value = entry
            if self._clock() >= expires:
                del self._entries[key]
                return MISS
            return value

    def take(self, key: K) -> V | Miss:
        """`get`, and the entry goes: its value has one owner, who may change it."""
        with self._lock:
            entry = self._entries.pop(key, None)
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
            self._entries.pop(key, None)
            if len(self._entries) >= self.max_entries:
                self._evict()
            self._entries[key] = (self._clock() + self.ttl, value)

    def forget(self, key: K | None = None) -> None:
        """Drop `key` (every key: None)."""
        with self._lock:
            self._generation += 1
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        now = self._clock()
        for key in [k for k, (expires, _) in self._entries.items() if now >= expires]:
            del self._entries[key]
        while len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]  # the oldest stored


class Caches:
    """This process's caches by name (`API_KEYS`, `WEBHOOKS`, `TASK_STORES`)."""

    def __init__(
        self,
        ttls: Mapping[str, float],
        *,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._caches: dict[str, TtlCache[Any, Any]] = {
            name: TtlCache(ttl, max_entries=max_entries, clock=clock) for name, ttl in ttls.items()
        }

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
