"""Time references for detail look-ups: the times the memory block shows, passed back.

Seed 003 addresses turns by time rather than by number: a turn's end time is stored, so it
stays the same id however the chain grows, and it is readable and naturally ranged. The block
shows `HH:MM:SS` in the display time zone, so a time of day is matched in that zone, on any
day: a chain spanning several days may have several turns at one `HH:MM:SS`, and all of them
are answers. A block spanning several days shows dates too, and a date with a time
(`2026-04-16 14:23:05`, `2026-04-16 14:23-14:30`) names moments of that day in the display zone,
as the block showed them. An ISO 8601 timestamp with `Z` or an offset names one moment exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

__all__ = ["TimeRef", "parse_time_ref"]

_CLOCK = r"(\d{2}):(\d{2})(?::(\d{2}))?"
_SINGLE = re.compile(_CLOCK)
_RANGE = re.compile(rf"{_CLOCK}\s*[-\u2013]\s*{_CLOCK}")
_ISO = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:Z|z|[+-]\d{2}(?::?\d{2})?)?"
)
# with a space, as the block writes it: `2026-04-16 23:58-00:02` is a range, while
# `2026-04-16T23:58-00:02` is ISO 8601 for a moment at offset -00:02
_DATED_RANGE = re.compile(rf"(\d{{4}}-\d{{2}}-\d{{2}}) +{_CLOCK}\s*[-\u2013]\s*{_CLOCK}")
_FORMS = (
    "HH:MM:SS, HH:MM, a range HH:MM[:SS]-HH:MM[:SS], a date and time YYYY-MM-DD HH:MM[:SS] "
    "or YYYY-MM-DD HH:MM[:SS]-HH:MM[:SS] (in the display time zone), or an ISO 8601 "
    "timestamp such as 2026-04-16T14:23:05Z"
)


@dataclass(frozen=True)
class TimeRef:
    """An inclusive span: times of day (any day, in the display zone) or UTC moments.

    A span of times of day whose end is before its start wraps past midnight
    (`23:58-00:02`). Bounds are whole seconds; a moment matches by its second.
    """

    start: time | datetime
    end: time | datetime

    def __post_init__(self) -> None:
        if isinstance(self.start, datetime) != isinstance(self.end, datetime):
            raise ValueError("a time reference's bounds must both be times or both moments")
        if isinstance(self.start, datetime) and isinstance(self.end, datetime):
            if self.start.tzinfo is None or self.end.tzinfo is None:
                raise ValueError("a time reference's moments must be timezone-aware")
            if self.end < self.start:
                raise ValueError("a time reference's end is before its start")

    @property
    def is_moment(self) -> bool:
        """Whether the bounds are absolute moments (from an ISO timestamp)."""
        return isinstance(self.start, datetime)

    def matches(self, moment_utc: datetime, tz: ZoneInfo) -> bool:
        """Whether a turn that ended at `moment_utc` is meant; times of day are read in `tz`."""
        if moment_utc.tzinfo is None or moment_utc.utcoffset() is None:
            raise ValueError("the moment to match must be timezone-aware")
        second = moment_utc.replace(microsecond=0)
        start, end = self.start, self.end
        if isinstance(start, datetime) and isinstance(end, datetime):
            return start <= second <= end
        if isinstance(start, time) and isinstance(end, time):
            local = second.astimezone(tz).time().replace(tzinfo=None)
            if start <= end:
                return start <= local <= end
            return local >= start or local <= end
        raise AssertionError("unreachable: bounds checked in __post_init__")

    def windows(
        self, first: datetime, last: datetime, tz: ZoneInfo
    ) -> list[tuple[datetime, datetime]]:
        """The inclusive spans of moments (UTC, whole seconds) the reference names between
        `first` and `last`: itself for moments, one a day (in `tz`; two on a day whose
        clock repeats the hour, one per reading) for times of day. A span may reach past
        `first` or `last`; one that misses them both is left out."""
        if isinstance(self.start, datetime) and isinstance(self.end, datetime):
            return [(self.start, self.end)]
        if not (isinstance(self.start, time) and isinstance(self.end, time)):
            raise AssertionError("unreachable: bounds checked in __post_init__")
        found: list[tuple[datetime, datetime]] = []
        offsets = _offsets(first, last, tz)
        if len(offsets) == 1:  # one offset all along: plain arithmetic, a window a day
            shift = timedelta(seconds=offsets.pop())
            day = (first + shift).date() - timedelta(days=1)
            while day <= (last + shift).date():
                end_day = day if self.start <= self.end else day + timedelta(days=1)
                start = datetime.combine(day, self.start, tzinfo=UTC) - shift
                end = datetime.combine(end_day, self.end, tzinfo=UTC) - shift
                if start <= last and end >= first.replace(microsecond=0):
                    found.append((start, end))
                day += timedelta(days=1)
            return found
        seen: set[tuple[datetime, datetime]] = set()  # a day's two folds are mostly one
        day = first.astimezone(tz).date() - timedelta(days=1)
        while day <= last.astimezone(tz).date():
            end_day = day if self.start <= self.end else day + timedelta(days=1)
            for fold in (0, 1):
                local = datetime.combine(day, self.start, tzinfo=tz).replace(fold=fold)
                start = local.astimezone(UTC)
                local_end = datetime.combine(end_day, self.end, tzinfo=tz).replace(fold=fold)
                end = local_end.astimezone(UTC)
                window = (start, end)
                if start <= last and end >= first.replace(microsecond=0) and window not in seen:
                    seen.add(window)
                    found.append(window)
            day += timedelta(days=1)
        return found

    def overlaps(self, start_utc: datetime, end_utc: datetime, tz: ZoneInfo) -> bool:
        """Whether a turn that ran from `start_utc` (its prompt) to `end_utc` (its end) is
        meant: a time in its span, or a range overlapping it; times of day read in `tz`.

        A time of day is in a span when the span begins or ends at it, or when the clock
        reaches the reference's first time inside the span."""
        first = start_utc.replace(microsecond=0)
        last = end_utc.replace(microsecond=0)
        if isinstance(self.start, datetime) and isinstance(self.end, datetime):
            return first <= self.end and last >= self.start
        if last - first >= timedelta(days=1):
            return True  # a span of a whole day holds every time of day
        if self.matches(first, tz) or self.matches(last, tz):
            return True
        if not isinstance(self.start, time):
            raise AssertionError("unreachable: bounds checked in __post_init__")
        local_first, local_last = first.astimezone(tz), last.astimezone(tz)
        if local_first.utcoffset() == local_last.utcoffset():
            # no change of the zone's offset inside the span: its clock runs evenly from
            # one end to the other (past midnight at most once, the span being under a day)
            begin = self.start
            a, b = local_first.time(), local_last.time()
            if local_first.date() == local_last.date():
                return a <= begin <= b
            return begin >= a or begin <= b
        return any(
            first <= begin <= last and self.matches(begin, tz)
            for begin, _ in self.windows(first, last, tz)
        )


def _clock(text: str, hour: str, minute: str, second: str | None, *, end: bool) -> time:
    """A time of day; a bound without seconds covers its whole minute."""
    h, m = int(hour), int(minute)
    if h > 23:
        raise ValueError(f"invalid time {text!r}: hour {h} is out of range (00-23)")
    if m > 59:
        raise ValueError(f"invalid time {text!r}: minute {m} is out of range (00-59)")
    if second is None:
        return time(h, m, 59 if end else 0)
    s = int(second)
    if s > 59:
        raise ValueError(f"invalid time {text!r}: second {s} is out of range (00-59)")
    return time(h, m, s)


def _iso(text: str, match: re.Match[str], tz: ZoneInfo) -> TimeRef:
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise ValueError(f"invalid timestamp {text!r}: {exc}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)  # as the memory block shows it
    start = moment.astimezone(UTC).replace(microsecond=0)
    end = start if match.group(3) is not None else start + timedelta(seconds=59)
    return TimeRef(start, end)


def _dated_range(text: str, match: re.Match[str], tz: ZoneInfo) -> TimeRef:
    day_text, h1, m1, s1, h2, m2, s2 = match.groups()
    try:
        day = date.fromisoformat(day_text)
    except ValueError as exc:
        raise ValueError(f"invalid date {day_text!r}: {exc}") from exc
    start = _clock(text, h1, m1, s1, end=False)
    end = _clock(text, h2, m2, s2, end=True)
    end_day = day + timedelta(days=1) if end < start else day  # past midnight
    return TimeRef(
        datetime.combine(day, start, tzinfo=tz).astimezone(UTC),
        datetime.combine(end_day, end, tzinfo=tz).astimezone(UTC),
    )


def parse_time_ref(text: str, tz: ZoneInfo | None = None) -> TimeRef:
    """Parse what a detail look-up was given; ValueError (saying what is accepted) if malformed.

    `HH:MM:SS` is that second and `HH:MM` that minute, on any day; `A-B` is the inclusive span
    from A to B (B's whole minute when it has no seconds, past midnight when B is before A);
    a date and time without a zone (`2026-04-16 14:23:05`, or `…T…`) is read in the display
    zone `tz` (UTC when not given), and with one it is that moment; either names that second,
    or that minute without seconds; `YYYY-MM-DD A-B` is that span on that day.
    """
    zone = tz or ZoneInfo("UTC")
    s = text.strip()
    if not s:
        raise ValueError(f"empty time reference: expected {_FORMS}")
    if (single := _SINGLE.fullmatch(s)) is not None:
        hour, minute, second = single.groups()
        return TimeRef(
            _clock(s, hour, minute, second, end=False), _clock(s, hour, minute, second, end=True)
        )
    if (span := _RANGE.fullmatch(s)) is not None:
        h1, m1, s1, h2, m2, s2 = span.groups()
        return TimeRef(_clock(s, h1, m1, s1, end=False), _clock(s, h2, m2, s2, end=True))
    if (dated := _DATED_RANGE.fullmatch(s)) is not None:
        return _dated_range(s, dated, zone)
    if (iso := _ISO.fullmatch(s)) is not None:
        return _iso(s, iso, zone)
    raise ValueError(f"malformed time reference {text!r}: expected {_FORMS}")


DAY_SECONDS = 86_400


def second_of_day(moment: datetime) -> int:
    """The second of its UTC day a moment falls in (0-86399): what a turn stores of its end,
    so that a time of day is an index range however many days a chain spans."""
    utc = moment.astimezone(UTC)
    return utc.hour * 3600 + utc.minute * 60 + utc.second


def utc_second_ranges(
    ref: TimeRef, first: datetime, last: datetime, tz: ZoneInfo
) -> list[tuple[int, int]]:
    """Inclusive ranges of UTC seconds of the day holding every moment in `[first, last]`
    whose time of day in `tz` `ref` matches (a time-of-day reference only).

    A local time of day is one UTC second of the day per offset the zone has in the span:
    one range per offset (two where it wraps past midnight), merged. They may hold more
    than the reference means (the caller filters with `ref.matches`), never less."""
    if not (isinstance(ref.start, time) and isinstance(ref.end, time)):
        raise ValueError("second ranges are for a time-of-day reference")
    start = ref.start.hour * 3600 + ref.start.minute * 60 + ref.start.second
    end = ref.end.hour * 3600 + ref.end.minute * 60 + ref.end.second
    local = [(start, end)] if start <= end else [(start, DAY_SECONDS - 1), (0, end)]
    ranges: list[tuple[int, int]] = []
    for offset in _offsets(first, last, tz):
        for a, b in local:
            low = (a - offset) % DAY_SECONDS
            high = low + (b - a)
            if high < DAY_SECONDS:
                ranges.append((low, high))
            else:
                ranges += [(low, DAY_SECONDS - 1), (0, high - DAY_SECONDS)]
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _offsets(first: datetime, last: datetime, tz: ZoneInfo) -> set[int]:
    """Every UTC offset (in seconds) the zone has between `first` and `last`: sampled once a
    day and at both ends, so only an offset in force for less than a day could be missed
    (no zone has had one)."""
    found: set[int] = set()
    moment, step = first, timedelta(days=1)
    while True:
        offset = moment.astimezone(tz).utcoffset()
        found.add(int(offset.total_seconds()) if offset is not None else 0)
        if moment >= last:
            return found
        moment = min(moment + step, last)
