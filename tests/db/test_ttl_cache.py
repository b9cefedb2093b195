"""The in-process TTL cache: expiry by an injected clock, forgetting, reads that raced a change,
values taken out and kept again after a commit."""

from __future__ import annotations

from app.db import signals
from app.db.caches import MISS, Caches, TtlCache
from tests.support.clock import ManualClock


def cache(ttl: float = 5.0, *, max_entries: int = 100) -> tuple[TtlCache[str, str], ManualClock]:
    clock = ManualClock()
    return TtlCache(ttl, max_entries=max_entries, clock=clock), clock


def test_a_value_is_kept_for_the_ttl_and_then_missed() -> None:
    kept, clock = cache(5.0)
    kept.put("k", "v", kept.stamp())

    clock.advance(4.9)
    assert kept.get("k") == "v"
    clock.advance(0.1)
    assert kept.get("k") is MISS


def test_none_is_a_value_not_a_miss() -> None:
    kept: TtlCache[str, str | None] = TtlCache(5.0, max_entries=10)

    kept.put("unknown", None, kept.stamp())

    assert kept.get("unknown") is None


def test_forget_drops_one_key_or_every_key() -> None:
    kept, _ = cache()
    for key in ("a", "b", "c"):
        kept.put(key, key, kept.stamp())

    kept.forget("a")
    assert [kept.get(k) for k in ("a", "b", "c")] == [MISS, "b", "c"]
    kept.forget()
    assert [kept.get(k) for k in ("a", "b", "c")] == [MISS, MISS, MISS]


def test_a_read_that_began_before_a_forget_is_not_kept() -> None:
    kept, _ = cache()
    stamp = kept.stamp()  # a read begins ...
    kept.forget("k")  # ... the rows change meanwhile ...

    kept.put("k", "old", stamp)  # ... and what it read may be the old rows

    assert kept.get("k") is MISS


def test_a_ttl_of_zero_keeps_nothing() -> None:
    kept, _ = cache(0.0)

    kept.put("k", "v", kept.stamp())

    assert kept.get("k") is MISS


def test_past_max_entries_the_oldest_stored_goes_first() -> None:
    kept, _ = cache(5.0, max_entries=2)
    for key in ("first", "second", "third"):
        kept.put(key, key, kept.stamp())

    assert [kept.get(k) for k in ("first", "second", "third")] == [MISS, "second", "third"]


def test_committed_forget_signals_apply_to_their_cache() -> None:
    caches = Caches({"a": 5.0, "b": 5.0}, max_entries=10)
    caches["a"].put("t", "x", caches["a"].stamp())
    caches["b"].put("t", "y", caches["b"].stamp())

    caches.apply([signals.WakeRunner(), signals.Forget("a", "t")])

    assert (caches["a"].get("t"), caches["b"].get("t")) == (MISS, "y")


def test_a_taken_value_goes_with_its_taker() -> None:
    kept, clock = cache(5.0)
    kept.put("k", "v", kept.stamp())

    assert kept.take("k") == "v"
    assert kept.take("k") is MISS
    kept.put("k", "w", kept.stamp())
    clock.advance(5.0)
    assert kept.take("k") is MISS


def test_committed_keep_signals_store_unless_something_was_forgotten_since() -> None:
    caches = Caches({"a": 5.0}, max_entries=10)
    stale = signals.Keep("a", "raced", "made", caches["a"].stamp())
    caches["a"].forget("raced")
    fresh = signals.Keep("a", "new", "made", caches["a"].stamp())

    caches.apply([stale, fresh])

    assert (caches["a"].get("new"), caches["a"].get("raced")) == ("made", MISS)
