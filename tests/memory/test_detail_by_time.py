"""The detail look-up reads only the index ranges a time can match; these pin it to the truth.

`utc_second_ranges` turns a time of day into ranges of seconds of the UTC day (one per
offset the zone has in the chain's span), which a turn's stored `ended_second` is looked up
by, so that a long chain is not read whole. It may over-select (the look-up filters with
`TimeRef.matches` afterwards) but must never miss a turn: not across a daylight-saving
change, a wrap past midnight, a zone with an odd offset, or a skipped day. Through the
database, the look-up must answer exactly what filtering every turn of the chain answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import MemoryTurn, Session
from app.domain.errors import NotFound
from app.memory.timeref import TimeRef, parse_time_ref, second_of_day, utc_second_ranges
from app.services.memory import detail
from app.settings import Settings

ZONES = [
    "UTC",
    "Europe/Berlin",
    "Europe/Dublin",  # negative daylight saving: winter is the "summer" offset minus an hour
    "America/New_York",
    "America/Sao_Paulo",  # changed at midnight
    "America/St_Johns",  # a half-hour offset
    "Australia/Lord_Howe",  # a half-hour change
    "Pacific/Apia",  # skipped 2011-12-30 entirely
    "Asia/Kolkata",
]


def _changes(zone: str) -> list[datetime]:
    """The moments the zone's offset changed in 2011-2012 and 2026, found hour by hour."""
    tz = ZoneInfo(zone)
    found = []
    for year in (2011, 2012, 2026):
        moment = datetime(year, 1, 1, tzinfo=UTC)
        previous = moment.astimezone(tz).utcoffset()
        while moment.year == year:
            moment += timedelta(hours=1)
            offset = moment.astimezone(tz).utcoffset()
            if offset != previous:
                found.append(moment)
            previous = offset
    return found or [datetime(2026, 6, 1, tzinfo=UTC)]


CHANGES = {zone: _changes(zone) for zone in ZONES}


@st.composite
def references(draw: st.DrawFn) -> str:
    """Times of day: a second, a minute, a range (which may wrap past midnight)."""

    def clock(seconds: bool) -> str:
        h, m, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
        return f"{h:02d}:{m:02d}:{s:02d}" if seconds else f"{h:02d}:{m:02d}"

    form = draw(st.sampled_from(["second", "minute", "range"]))
    if form == "second":
        return clock(True)
    if form == "minute":
        return clock(False)
    seconds = draw(st.booleans())
    return f"{clock(seconds)}-{clock(seconds)}"


def _edges(ref: TimeRef, first: datetime, last: datetime, tz: ZoneInfo) -> list[datetime]:
    """Moments right at and around the reference's bounds on every day of the span."""
    assert isinstance(ref.start, time) and isinstance(ref.end, time)
    bounds = []
    day = first.astimezone(tz).date() - timedelta(days=1)
    while day <= last.astimezone(tz).date() + timedelta(days=1):
        for clock in (ref.start, ref.end):
            for fold in (0, 1):
                local = datetime.combine(day, clock, tzinfo=tz).replace(fold=fold)
                bounds.append(local.astimezone(UTC))
        day += timedelta(days=1)
    nudges = [timedelta(0), timedelta(microseconds=-1), timedelta(seconds=1, microseconds=-1)]
    nudges += [timedelta(seconds=1), timedelta(hours=1), timedelta(hours=-1)]
    return [b + n for b in bounds for n in nudges]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_matching_moment_lies_in_a_range(data: st.DataObject) -> None:
    zone = data.draw(st.sampled_from(ZONES))
    tz = ZoneInfo(zone)
    change = data.draw(st.sampled_from(CHANGES[zone]))
    first = change - timedelta(seconds=data.draw(st.integers(0, 3 * 86400)))
    last = first + timedelta(seconds=data.draw(st.integers(0, 4 * 86400)))
    ref = parse_time_ref(data.draw(references()))
    step = timedelta(seconds=data.draw(st.integers(1, 3600)), microseconds=123_457)

    ranges = utc_second_ranges(ref, first, last, tz)

    assert all(0 <= a <= b < 86_400 for a, b in ranges)
    assert all(ranges[i][1] + 1 < ranges[i + 1][0] for i in range(len(ranges) - 1))  # merged
    moments = [first + step * k for k in range(int((last - first) / step) + 1)]
    for moment in [first, last, *moments, *_edges(ref, first, last, tz)]:
        if first <= moment <= last and ref.matches(moment, tz):
            second = second_of_day(moment)
            assert any(a <= second <= b for a, b in ranges), (zone, str(ref), moment)


def test_in_a_zone_without_changes_a_range_is_exactly_the_span() -> None:
    first = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    last = datetime(2026, 9, 3, 9, 0, tzinfo=UTC)

    assert utc_second_ranges(parse_time_ref("08:00-08:30"), first, last, ZoneInfo("UTC")) == [
        (8 * 3600, 8 * 3600 + 30 * 60 + 59)
    ]


def test_a_zone_with_daylight_saving_gives_a_range_per_offset() -> None:
    first = datetime(2026, 1, 1, tzinfo=UTC)
    last = datetime(2026, 12, 31, tzinfo=UTC)

    ranges = utc_second_ranges(parse_time_ref("08:00:00"), first, last, BERLIN)

    assert ranges == [(6 * 3600, 6 * 3600), (7 * 3600, 7 * 3600)]  # CEST, CET


# --- through the database ----------------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")
# turns every 17 min 13.4 s across both of Berlin's 2026 changes (29 March, 25 October)
SPRING = [
    datetime(2026, 3, 27, 0, 7, tzinfo=UTC) + i * timedelta(seconds=1033.4) for i in range(420)
]
AUTUMN = [
    datetime(2026, 10, 23, 0, 3, tzinfo=UTC) + i * timedelta(seconds=1033.4) for i in range(420)
]


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = Database(Settings(_env_file=None, database_url=database_url))

    async def seed(session: AsyncSession) -> None:
        session.add(Session(id="ses_a", tenant="t"))
        session.add(Session(id="ses_b", tenant="t", continues_from="ses_a"))
        session.add(Session(id="ses_c", tenant="t", continues_from="ses_b"))
        await session.flush()
        for owner, times in (("ses_a", SPRING), ("ses_b", AUTUMN)):
            for turn, ended_at in enumerate(times, start=1):
                session.add(
                    MemoryTurn(
                        session_id=owner,
                        origin_session_id=owner,
                        turn=turn,
                        ended_at=ended_at,
                        user_text=f"q{turn}",
                        assistant_text=f"a{turn}",
                    )
                )

    await db.write(seed)
    yield db
    await db.dispose()


@pytest.mark.parametrize(
    "reference",
    [
        "02:30",  # in the hour that repeats in October and does not exist in March
        "02:10-02:50",
        "01:55-03:05",
        "23:50-00:20",  # past midnight
        "00:00-23:59",  # every turn of every day
        SPRING[0].astimezone(BERLIN).strftime("%H:%M:%S"),
        AUTUMN[200].astimezone(BERLIN).strftime("%H:%M:%S"),
        AUTUMN[200].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "2026-10-25T01:30Z",  # a minute, by ISO
        "2026-01-01T00:00:00Z",  # before the chain: nothing
    ],
)
async def test_the_look_up_finds_exactly_the_turns_filtering_all_of_them_finds(
    database: Database, reference: str
) -> None:
    ref = parse_time_ref(reference)
    expected = sorted(
        (owner, turn)
        for owner, times in (("ses_a", SPRING), ("ses_b", AUTUMN))
        for turn, ended_at in enumerate(times, start=1)
        if ref.matches(ended_at, BERLIN)
    )

    async with database.read() as session:
        try:
            found = await detail(session, "t", "ses_c", reference, tz=BERLIN)
        except NotFound:
            found = []

    assert sorted((t.session_id, t.turn) for t in found) == expected
    assert [t.ended_at for t in found] == sorted((t.ended_at for t in found), reverse=True)


async def test_a_turn_whose_end_moves_is_found_at_its_new_time(database: Database) -> None:
    """A re-projected turn (more of it arrived) gets a later `ended_at`; its stored second
    of the day must follow, or the look-up by the new time would miss it."""
    moved_to = datetime(2026, 3, 27, 17, 45, 12, tzinfo=UTC)

    async def move(session: AsyncSession) -> None:
        turn = await session.get(MemoryTurn, 1)
        assert turn is not None
        turn.ended_at = moved_to
        session.add(turn)

    await database.write(move)
    async with database.read() as session:
        found = await detail(
            session, "t", "ses_c", moved_to.astimezone(BERLIN).strftime("%H:%M:%S"), tz=BERLIN
        )

    assert [(t.session_id, t.turn) for t in found] == [("ses_a", 1)]


def _reaches(ref: TimeRef, first: datetime, last: datetime, tz: ZoneInfo) -> bool:
    """What `TimeRef.overlaps` means for a time of day, day by day and fold by fold: the
    span begins or ends in the reference, or the zone's clock shows its first time inside."""
    assert isinstance(ref.start, time)
    first, last = first.replace(microsecond=0), last.replace(microsecond=0)
    if ref.matches(first, tz) or ref.matches(last, tz):
        return True
    day = first.astimezone(tz).date() - timedelta(days=1)
    while day <= last.astimezone(tz).date() + timedelta(days=1):
        for fold in (0, 1):
            local = datetime.combine(day, ref.start, tzinfo=tz).replace(fold=fold)
            moment = local.astimezone(UTC)
            if first <= moment <= last and ref.matches(moment, tz):
                return True
        day += timedelta(days=1)
    return False


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_span_overlaps_a_time_of_day_when_its_clock_reaches_it(data: st.DataObject) -> None:
    zone = data.draw(st.sampled_from(ZONES))
    tz = ZoneInfo(zone)
    change = data.draw(st.sampled_from(CHANGES[zone]))
    first = change - timedelta(seconds=data.draw(st.integers(0, 86400)), microseconds=250_000)
    last = first + timedelta(seconds=data.draw(st.integers(0, 86399)))
    ref = parse_time_ref(data.draw(references()))

    assert ref.overlaps(first, last, tz) == _reaches(ref, first, last, tz), (zone, str(ref))


async def _one_turn_a_day(db: Database, session_id: str, days: int) -> None:
    """A session prompted at 10:00 UTC every day for `days` days, each turn ending at 10:05."""

    async def seed(session: AsyncSession) -> None:
        session.add(Session(id=session_id, tenant="t"))
        await session.flush()
        start = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
        for turn in range(1, days + 1):
            began = start + timedelta(days=turn - 1)
            session.add(
                MemoryTurn(
                    session_id=session_id,
                    origin_session_id=session_id,
                    turn=turn,
                    started_at=began,
                    ended_at=began + timedelta(minutes=5),
                    user_text=f"q{turn}",
                    assistant_text=f"a{turn}",
                )
            )

    await db.write(seed)


async def _look_up(db: Database, session_id: str, reference: str) -> tuple[int, int]:
    """How many turns a look-up found and how many statements it ran."""
    before = db.stats.snapshot()
    async with db.read() as session:
        found = len(await detail(session, "t", session_id, reference, tz=ZoneInfo("UTC")))
    return found, db.stats.since(before).statements


async def test_a_time_of_day_inside_turns_costs_the_same_statements_over_450_days_as_5(
    database_url: str,
) -> None:
    """Each day's turn runs across 10:02 without ending in it: found by one probe a day,
    all of them in one statement however many days the chain has."""
    db = Database(Settings(_env_file=None, database_url=database_url))
    try:
        await _one_turn_a_day(db, "ses_5", 5)
        await _one_turn_a_day(db, "ses_450", 450)
        await _look_up(db, "ses_5", "10:02")  # the first read of a unit also prepares its own
        short = await _look_up(db, "ses_5", "10:02")
        long = await _look_up(db, "ses_450", "10:02")
    finally:
        await db.dispose()

    assert (short[0], long[0]) == (5, 450)
    assert long[1] == short[1]
