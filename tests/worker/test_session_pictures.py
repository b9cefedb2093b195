"""What a chat turn leaves for its session's next turn in the process: taken once, and
only within `STRATA_JOB_SESSION_CACHE_SECONDS`; an expired picture is a miss, whose cost
is the read it would have saved."""

from __future__ import annotations

from app.domain.items import TextBlock, UserMessage
from app.domain.tasks import TaskStore
from app.settings import Settings
from app.worker.job_session import Picture
from app.worker.pictures import SessionPictures
from tests.support.clock import ManualClock


def pictures(seconds: float = 60.0, entries: int = 10) -> tuple[SessionPictures, ManualClock]:
    clock = ManualClock()
    settings = Settings(
        _env_file=None, job_session_cache_seconds=seconds, job_session_cache_entries=entries
    )
    return SessionPictures(settings, clock=clock), clock


def picture(last_seq: int = 4) -> Picture:
    return Picture(segment=0, last_seq=last_seq, items=[], tasks=TaskStore())


def test_a_kept_picture_is_taken_by_the_sessions_next_turn_once() -> None:
    kept, _clock = pictures()
    left = picture()
    kept.keep("s1", left)

    assert kept.take("s1") is left
    assert kept.take("s1") is None  # taken, not shared: its owner changes its task list


def test_a_picture_older_than_the_setting_is_not_taken() -> None:
    kept, clock = pictures(seconds=60.0)
    kept.keep("s1", picture())

    clock.advance(60.0)

    assert kept.take("s1") is None


def test_a_picture_within_the_setting_is_taken() -> None:
    kept, clock = pictures(seconds=60.0)
    kept.keep("s1", picture())

    clock.advance(59.9)

    assert kept.take("s1") is not None


def test_past_the_entries_setting_the_oldest_picture_goes_first() -> None:
    kept, clock = pictures(entries=2)
    for session_id in ("s1", "s2", "s3"):
        kept.keep(session_id, picture())
        clock.advance(1.0)

    assert [kept.take(s) is not None for s in ("s1", "s2", "s3")] == [False, True, True]


def test_past_the_items_setting_the_oldest_pictures_go_until_the_kept_items_fit() -> None:
    clock = ManualClock()
    settings = Settings(_env_file=None, job_session_cache_items=10)
    kept = SessionPictures(settings, clock=clock)
    for n in range(50):
        kept.keep(f"s{n}", picture_of(items=4))

    assert kept.items <= 10
    assert len(kept) == 2
    assert kept.take("s49") is not None


def test_a_picture_holding_more_items_than_the_setting_is_not_kept() -> None:
    kept = SessionPictures(Settings(_env_file=None, job_session_cache_items=10))
    kept.keep("s1", picture_of(items=11))

    assert kept.take("s1") is None
    assert kept.items == 0


def test_taken_and_expired_pictures_no_longer_count_against_the_items_setting() -> None:
    clock = ManualClock()
    settings = Settings(_env_file=None, job_session_cache_items=10, job_session_cache_seconds=60.0)
    kept = SessionPictures(settings, clock=clock)
    kept.keep("s1", picture_of(items=6))
    kept.take("s1")
    kept.keep("s2", picture_of(items=6))
    clock.advance(60.0)
    kept.keep("s3", picture_of(items=6))

    assert kept.items == 6
    assert kept.take("s3") is not None


def picture_of(items: int) -> Picture:
    item = UserMessage(content=[TextBlock(text="hello")])
    return Picture(segment=0, last_seq=items, items=[item] * items, tasks=TaskStore())
