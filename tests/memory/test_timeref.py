"""Time references for detail look-ups: the forms accepted and the turns they match."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.memory.timeref import TimeRef, parse_time_ref

UTC_ZONE = ZoneInfo("UTC")
TOKYO = ZoneInfo("Asia/Tokyo")


def utc(day: int, hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 4, day, hour, minute, second, micro, tzinfo=UTC)


def test_hh_mm_ss_is_that_second() -> None:
    assert parse_time_ref("14:23:05") == TimeRef(time(14, 23, 5), time(14, 23, 5))


def test_hh_mm_is_that_whole_minute() -> None:
    assert parse_time_ref("14:23") == TimeRef(time(14, 23, 0), time(14, 23, 59))


def test_a_minute_range_includes_the_whole_end_minute() -> None:
    assert parse_time_ref("14:23-14:30") == TimeRef(time(14, 23, 0), time(14, 30, 59))


def test_a_second_range_is_inclusive_to_the_second() -> None:
    assert parse_time_ref("14:23:05-14:23:09") == TimeRef(time(14, 23, 5), time(14, 23, 9))


def test_surrounding_and_inner_spaces_are_accepted() -> None:
    assert parse_time_ref("  14:23 - 14:30 ") == parse_time_ref("14:23-14:30")


def test_an_iso_timestamp_with_z_is_that_second_in_utc() -> None:
    assert parse_time_ref("2026-04-16T14:23:05Z") == TimeRef(utc(16, 14, 23, 5), utc(16, 14, 23, 5))


def test_an_iso_timestamp_with_an_offset_is_converted_to_utc() -> None:
    assert parse_time_ref("2026-04-16T23:23:05+09:00").start == utc(16, 14, 23, 5)


def test_a_naive_iso_timestamp_means_utc() -> None:
    assert parse_time_ref("2026-04-16T14:23:05").start == utc(16, 14, 23, 5)


def test_an_iso_timestamp_with_fractions_matches_its_whole_second() -> None:
    ref = parse_time_ref("2026-04-16T14:23:05.250Z")
    assert ref.matches(utc(16, 14, 23, 5, 999_999), UTC_ZONE)
    assert not ref.matches(utc(16, 14, 23, 6), UTC_ZONE)


@pytest.mark.parametrize(
    "text",
    ["24:00", "12:60", "12:00:60", "1230", "12:3", "1:30", "12:30:5", "noon", "", "   ",
     "12:30-", "-12:30", "12:30-13:00-14:00", "2026-04-16", "2026-13-01T00:00:00Z"],
)  # fmt: skip
def test_malformed_references_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_ref(text)


def test_the_error_names_the_accepted_forms() -> None:
    with pytest.raises(ValueError, match=r"expected HH:MM:SS, HH:MM, a range"):
        parse_time_ref("yesterday")


def test_the_error_names_the_out_of_range_field() -> None:
    with pytest.raises(ValueError, match="hour 24 is out of range"):
        parse_time_ref("24:00")


def test_a_time_of_day_matches_that_second_on_several_days() -> None:
    ref = parse_time_ref("14:23:05")
    moments = [utc(14, 14, 23, 5), utc(15, 14, 23, 5, 400_000), utc(16, 14, 23, 5)]
    assert all(ref.matches(m, UTC_ZONE) for m in moments)
    assert not ref.matches(utc(16, 14, 23, 6), UTC_ZONE)


def test_a_minute_matches_its_first_and_last_second_only() -> None:
    ref = parse_time_ref("14:23")
    assert [ref.matches(utc(16, 14, m, s), UTC_ZONE) for m, s in [(22, 59), (23, 0), (23, 59)]] + [
        ref.matches(utc(16, 14, 24, 0), UTC_ZONE)
    ] == [False, True, True, False]


def test_a_range_ending_before_it_starts_wraps_past_midnight() -> None:
    ref = parse_time_ref("23:58-00:02")
    assert ref.matches(utc(16, 23, 59, 30), UTC_ZONE)
    assert ref.matches(utc(17, 0, 1, 0), UTC_ZONE)
    assert ref.matches(utc(17, 0, 2, 59), UTC_ZONE)
    assert not ref.matches(utc(17, 0, 3, 0), UTC_ZONE)
    assert not ref.matches(utc(16, 12, 0, 0), UTC_ZONE)


def test_times_of_day_are_read_in_the_display_time_zone() -> None:
    ref = parse_time_ref("23:23:05")
    assert ref.matches(utc(16, 14, 23, 5), TOKYO)
    assert not ref.matches(utc(16, 14, 23, 5), UTC_ZONE)


def test_an_iso_timestamp_matches_only_that_day() -> None:
    ref = parse_time_ref("2026-04-16T14:23:05Z")
    assert ref.matches(utc(16, 14, 23, 5), TOKYO)
    assert not ref.matches(utc(15, 14, 23, 5), UTC_ZONE)


def test_an_iso_timestamp_without_seconds_matches_that_minute() -> None:
    ref = parse_time_ref("2026-04-16T14:23Z")
    assert ref.end - ref.start == timedelta(seconds=59)  # type: ignore[operator]


def test_matching_a_naive_moment_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_time_ref("14:23").matches(datetime(2026, 4, 16, 14, 23), UTC_ZONE)  # noqa: DTZ001


def test_bounds_of_different_kinds_are_rejected() -> None:
    with pytest.raises(ValueError, match="both"):
        TimeRef(time(14, 23), utc(16, 14, 23))


def test_a_date_and_time_as_the_block_shows_it_is_read_in_the_display_zone() -> None:
    ref = parse_time_ref("2026-04-16 23:23:05", ZoneInfo("Asia/Tokyo"))
    assert ref == TimeRef(utc(16, 14, 23, 5), utc(16, 14, 23, 5))


def test_a_date_and_minute_is_that_whole_minute_of_that_day() -> None:
    ref = parse_time_ref("2026-04-16 14:23")
    assert ref == TimeRef(utc(16, 14, 23, 0), utc(16, 14, 23, 59))
    assert not ref.matches(utc(17, 14, 23, 5), UTC_ZONE)


def test_a_dated_range_is_that_span_of_that_day_and_wraps_past_midnight() -> None:
    assert parse_time_ref("2026-04-16 14:23-14:30") == TimeRef(
        utc(16, 14, 23, 0), utc(16, 14, 30, 59)
    )
    assert parse_time_ref("2026-04-16 23:58-00:02") == TimeRef(
        utc(16, 23, 58, 0), utc(17, 0, 2, 59)
    )


def test_an_iso_offset_after_a_t_is_still_an_offset_not_a_range() -> None:
    assert parse_time_ref("2026-04-16T23:58-00:02").start == utc(17, 0, 0, 0)
