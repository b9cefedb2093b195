"""The process's holder of session views: a view given back is taken by the session's
next reader once, and only within `STRATA_JOB_SESSION_CACHE_SECONDS`; at most
`STRATA_JOB_SESSION_CACHE_ENTRIES` views holding `STRATA_JOB_SESSION_CACHE_ITEMS` items in
all are kept, the oldest going first. A miss costs only the read it would have saved."""

from __future__ import annotations

from app.db.caches import SESSION_VIEWS, Caches, Weighed
from app.domain.items import TextBlock, UserMessage
from app.services.session_view import SessionView, give_back, take_view
from app.settings import Settings
from tests.support.clock import ManualClock


def holder(settings: Settings, clock: ManualClock | None = None) -> Caches:
    """The holder as the `Database` makes it from `settings`."""
    bound = Weighed(
        settings.job_session_cache_seconds,
        settings.job_session_cache_entries,
        settings.job_session_cache_items,
    )
    return Caches({}, max_entries=1, clock=clock or ManualClock(), weighed={SESSION_VIEWS: bound})


def views(seconds: float = 60.0, entries: int = 10) -> tuple[Caches, ManualClock]:
    clock = ManualClock()
    settings = Settings(
        _env_file=None, job_session_cache_seconds=seconds, job_session_cache_entries=entries
    )
    return holder(settings, clock), clock


def view_of(session_id: str, items: int = 0) -> SessionView:
    """A view that has read the log up to `items` items, all of one segment."""
    view = SessionView(session_id)
    view.tasks_loaded, view.segment = True, 0
    view.items = [UserMessage(content=[TextBlock(text="hello")])] * items
    view.last_seq = items
    return view


def test_a_view_given_back_is_taken_by_the_sessions_next_reader_once() -> None:
    held, _clock = views()
    left = view_of("s1")
    give_back(held, left)

    assert take_view(held, "s1") is left
    assert not take_view(held, "s1").tasks_loaded  # taken, not shared: a new one now


def test_a_view_that_read_nothing_is_not_kept() -> None:
    held, _clock = views()
    give_back(held, SessionView("s1"))

    assert len(held[SESSION_VIEWS]) == 0


def test_a_view_older_than_the_setting_is_not_taken() -> None:
    held, clock = views(seconds=60.0)
    give_back(held, view_of("s1"))

    clock.advance(60.0)

    assert not take_view(held, "s1").tasks_loaded


def test_a_view_within_the_setting_is_taken() -> None:
    held, clock = views(seconds=60.0)
    give_back(held, view_of("s1"))

    clock.advance(59.9)

    assert take_view(held, "s1").tasks_loaded


def test_past_the_entries_setting_the_oldest_view_goes_first() -> None:
    held, clock = views(entries=2)
    for session_id in ("s1", "s2", "s3"):
        give_back(held, view_of(session_id))
        clock.advance(1.0)

    assert [take_view(held, s).tasks_loaded for s in ("s1", "s2", "s3")] == [False, True, True]


def test_past_the_items_setting_the_oldest_views_go_until_the_kept_items_fit() -> None:
    held = holder(Settings(_env_file=None, job_session_cache_items=10))
    for n in range(50):
        give_back(held, view_of(f"s{n}", items=4))

    assert held[SESSION_VIEWS].weight <= 10
    assert len(held[SESSION_VIEWS]) == 2
    assert take_view(held, "s49").tasks_loaded


def test_a_view_holding_more_items_than_the_setting_is_not_kept() -> None:
    held = holder(Settings(_env_file=None, job_session_cache_items=10))
    give_back(held, view_of("s1", items=11))

    assert not take_view(held, "s1").tasks_loaded
    assert held[SESSION_VIEWS].weight == 0


def test_taken_and_expired_views_no_longer_count_against_the_items_setting() -> None:
    clock = ManualClock()
    settings = Settings(_env_file=None, job_session_cache_items=10, job_session_cache_seconds=60.0)
    held = holder(settings, clock)
    give_back(held, view_of("s1", items=6))
    take_view(held, "s1")
    give_back(held, view_of("s2", items=6))
    clock.advance(60.0)
    give_back(held, view_of("s3", items=6))

    assert held[SESSION_VIEWS].weight == 6
    assert take_view(held, "s3").tasks_loaded
