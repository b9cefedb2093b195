"""The memory block: what a continuing session is told about its predecessor chain.

Seed 003's shape, in English: the newest turns in full (L2, at most `window` = 20), older turns
as their one-line summaries (L1), then a line on how to fetch a turn's details by its time.
Every line starts with the turn's stable time (its end) in the display time zone, the same time
the detail look-up takes, so the model can pass what it reads straight back.

Seed 003 set no size limit, reasoning that the block can never be heavier than plain Claude Code.
Claude Code, though, inlines a SessionStart `additionalContext` only up to 10,000 characters
(longer ones become a file the model is merely pointed at), so the block has a budget in
characters and is never longer (`max_chars`, `STRATA_MEMORY_BLOCK_MAX_CHARS`, 9,500 by default):

1. the newest turns as L2, oldest of them first, as many of the `window` newest as can each
   have at least `MIN_L2_SHARE` characters; their room is shared fairly (a short turn takes
   what it needs, long ones split the rest evenly) and a turn longer than its share is cut
   in its middle, its start and its end kept (its request and its conclusion), with a
   marker that names its time. When older turns follow (or one of these has only a
   summary), L2 fills at most `l2_ratio` of the budget (`STRATA_MEMORY_BLOCK_L2_RATIO`,
   0.7), so that long recent turns cannot crowd every summary out; what L2 leaves unused
   goes to the summaries, and what the summaries leave unused (fewer or shorter lines,
   older turns with nothing to show) back to L2; a turn with nothing to show takes no room;
2. then older turns as L1 lines, newest first, each at most `LINE_MAX` characters, until the
   budget is spent;
3. then a line counting the turns left out, and the guide line naming the detail look-up with
   a real time from the block.

When the shown turns span more than one day, each day starts with a date line, and the guide's
example carries the date (a bare time of day matches on every day).

`MemoryBlockBuilder` takes the turns newest first and says when it is full, so a caller reading
them from a database reads about as many as fit: rendering costs O(budget), not O(chain).
Nothing is dropped for lack of a summary: an older turn not summarized yet shows its L2 text,
and a turn that has only a summary (imported history) shows the summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from zoneinfo import ZoneInfo

__all__ = [
    "DEFAULT_WINDOW",
    "HEADING",
    "LINE_MAX",
    "MIN_BLOCK_CHARS",
    "MIN_L2_SHARE",
    "BlockCounts",
    "DetailHint",
    "MemoryBlockBuilder",
    "MemoryTurn",
    "RenderedBlock",
    "clock",
    "render_memory_block",
]

DEFAULT_WINDOW = 20  # seed 003: about 1.5x the median session length, just under p75
HEADING = "## Strata: session memory"
RECENT_HEADING = "### Recent turns"
EARLIER_HEADING = "### Earlier turns (summaries, newest first)"
MIN_L2_SHARE = 300  # a turn shown whole gets at least this much room, or it becomes an L1 line
# a cut turn's text keeps this share of its room at its start, the rest at its end
CUT_HEAD_SHARE = 0.6
LINE_MAX = 400  # an L1 line (or an unsummarized turn's L2 shown as one) is cut to this
MIN_BLOCK_CHARS = 1000  # room for the heading, a few lines, the count and the guide line
_OMITTED_RESERVE = 160  # the count line's longest form, digits and dates included
_DATE_LINE = len("#### 2026-04-16\n")


class DetailHint(StrEnum):
    """Who reads the block, and so how the guide line says to fetch details."""

    sc_detail = "sc-detail"  # Claude Code, through the kit's /sc-detail command
    plugin_sc_detail = "strata:sc-detail"  # the same command of the kit as a plugin
    # Claude Code with Strata's MCP server `strata` (installed, or the plugin's)
    mcp_detail = "mcp__strata__"
    plugin_mcp_detail = "mcp__plugin_strata_strata__"
    detail_tool = "detail-tool"  # a Strata session's agent, through its Detail tool

    @classmethod
    def of_kit(cls, kit_mode: str | None, kit_mcp: bool) -> DetailHint:
        """The look-up a Claude Code reader has, from what its hook says: Strata's MCP tool
        when Claude Code has the server, else the kit's command, each as Claude Code names
        it for a plugin (`mcp__plugin_strata_strata__…`, `/strata:sc-detail`) or for
        settings."""
        plugin = kit_mode == "plugin"
        if kit_mcp:
            return cls.plugin_mcp_detail if plugin else cls.mcp_detail
        return cls.plugin_sc_detail if plugin else cls.sc_detail


@dataclass(frozen=True)
class MemoryTurn:
    """A turn of the chain as stored: its end time, its L2 and its L1 (None until summarized).

    The texts may be cut already (a reader asks the database for no more than can be shown);
    a text longer than the room it gets is cut again, with a marker, here.
    """

    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None


@dataclass(frozen=True)
class BlockCounts:
    """How the block shows the chain: turns whole (L2), as lines (L1), left out, in all."""

    l2_turns: int
    l1_turns: int
    omitted_turns: int
    total_turns: int


@dataclass(frozen=True)
class RenderedBlock:
    text: str
    counts: BlockCounts


def clock(moment: datetime, tz: ZoneInfo) -> str:
    """A moment as `HH:MM:SS` in the display time zone: the form detail look-ups accept."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("memory times must be timezone-aware")
    return moment.astimezone(tz).strftime("%H:%M:%S")


def _local_day(moment: datetime, tz: ZoneInfo) -> date:
    return moment.astimezone(tz).date()


def _has_l2(turn: MemoryTurn) -> bool:
    return bool(turn.user_text.strip() or turn.assistant_text.strip())


def _summary(turn: MemoryTurn) -> str | None:
    """A turn's summary line: its L1, else its L2 so that nothing is lost, else None."""
    if turn.l1 is not None and turn.l1.strip():
        return " ".join(turn.l1.split())
    parts = [
        f"user: {turn.user_text}" if turn.user_text.strip() else "",
        f"assistant: {turn.assistant_text}" if turn.assistant_text.strip() else "",
    ]
    text = " ".join(" / ".join(p for p in parts if p).split())
    return text or None


def cut(text: str, room: int, marker: str = "…") -> str:
    """`text` in at most `room` characters: whole, or its start and `marker`."""
    if len(text) <= room:
        return text
    keep = max(room - len(marker), 0)
    return (text[:keep].rstrip() + marker)[:room]


def cut_between(text: str, room: int, marker: str, head_share: float) -> str:
    """`text` in at most `room` characters: whole, or its start, `marker` and its end,
    the start taking `head_share` of what the marker leaves (a turn's request is at its
    start, its conclusion at its end)."""
    if len(text) <= room:
        return text
    keep = max(room - len(marker), 0)
    head = int(keep * head_share)
    tail = keep - head
    return (text[:head].rstrip() + marker + (text[-tail:].lstrip() if tail else ""))[:room]


def _cut_marker(stamp: str) -> str:
    return f" [… cut; the whole turn: detail of {stamp}]"


@dataclass
class _Line:
    ended_at: datetime
    day: date  # the local day of `ended_at`
    text: str  # without the trailing newline


@dataclass
class _L2Turn:
    turn: MemoryTurn
    need: int  # characters of its lines uncut
    share: int = 0


def _share(turns: list[_L2Turn], room: int) -> int:
    """Share `room` fairly among the turns (a short turn takes what it needs, long ones
    split the rest evenly), setting each one's `share`; returns what is left."""
    left = room
    for count, entry in enumerate(sorted(turns, key=lambda e: e.need)):
        entry.share = min(entry.need, left // (len(turns) - count))
        left -= entry.share
    return left


def _pair_lines(turn: MemoryTurn, stamp: str, room: int) -> list[str]:
    """The `[user]` / `[assistant]` lines of a turn in at most `room` characters (newlines
    between them included), each side cut fairly when both do not fit."""
    prefixes = [f"[{stamp}] [user]: ", f"[{stamp}] [assistant]: "]
    texts = [turn.user_text.strip("\n"), turn.assistant_text.strip("\n")]
    sides = [i for i in (0, 1) if texts[i].strip()]
    overhead = sum(len(prefixes[i]) for i in sides) + len(sides) - 1
    left = max(room - overhead, 0)
    sizes = {i: len(texts[i]) for i in sides}
    rooms: dict[int, int] = {}
    for count, i in enumerate(sorted(sides, key=lambda s: sizes[s])):
        fair = left // (len(sides) - count)
        rooms[i] = min(sizes[i], fair)
        left -= rooms[i]
    marker = _cut_marker(stamp) + " "
    return [prefixes[i] + cut_between(texts[i], rooms[i], marker, CUT_HEAD_SHARE) for i in sides]


def _pair_need(turn: MemoryTurn, stamp: str) -> int:
    sides = [t for t in (turn.user_text.strip("\n"), turn.assistant_text.strip("\n")) if t.strip()]
    prefix = len(f"[{stamp}] [assistant]: ")
    return sum(prefix + len(t) for t in sides) + len(sides) - 1


@dataclass
class MemoryBlockBuilder:
    """Builds the block from the chain's turns, newest first, within `max_chars`.

    Give it the newest turns (the `window` newest, or all there are) with `take_recent`,
    then further turns one by one with `offer_earlier` until it answers False (full);
    `render(total)` makes the text, `total` being how many turns the chain has (for the count
    of what is left out). `oldest` is the end of the chain's first turn.
    """

    max_chars: int
    window: int
    tz: ZoneInfo
    hint: DetailHint
    oldest: datetime | None = None
    l2_ratio: float = 0.7
    _recent: list[_L2Turn] = field(default_factory=list)
    _earlier: list[_Line] = field(default_factory=list)
    _room: int = 0
    _consumed: int = 0
    _full: bool = False
    _first_left_out: datetime | None = None

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError("window must not be negative")
        if self.max_chars < MIN_BLOCK_CHARS:
            raise ValueError(f"max_chars must be at least {MIN_BLOCK_CHARS}")
        if not 0 < self.l2_ratio <= 1:
            raise ValueError("l2_ratio must be in (0, 1]")
        fixed = len(HEADING) + 2 + len("---\n") + 2 + _OMITTED_RESERVE + self._hint_reserve()
        self._room = self.max_chars - fixed

    def _hint_reserve(self) -> int:
        sample = datetime(2026, 12, 31, 23, 59, 59, tzinfo=self.tz)
        return len(self._hint_line([sample], dated=True)) + 1

    # --- taking turns --------------------------------------------------------------------

    def take_recent(self, newest_first: Sequence[MemoryTurn], *, older: bool) -> list[MemoryTurn]:
        """Choose the turns shown whole among the `window` newest (given newest first);
        returns the others among them, newest first, for the caller to offer as earlier
        turns before any older one. `older`: whether the chain has turns before these."""
        newest = list(newest_first[: self.window])
        room = self._room - len(RECENT_HEADING) - 2
        # leave the summaries their place, when there may be any: older turns, or one of
        # these with a summary but no L2 (a turn with neither shows nothing at all)
        summaries = any(not _has_l2(t) and _summary(t) is not None for t in newest)
        if older or len(newest_first) > self.window or summaries:
            room = int(room * self.l2_ratio)
        unused = self._room - len(RECENT_HEADING) - 2 - room
        chosen: list[_L2Turn] = []
        days: set[date] = set()
        floor = 0
        for turn in newest:
            if not _has_l2(turn):
                continue
            need = _pair_need(turn, clock(turn.ended_at, self.tz)) + 1
            day = _local_day(turn.ended_at, self.tz)
            dated = 0 if day in days else _DATE_LINE  # a day's first turn may get a date line
            if floor + min(need, MIN_L2_SHARE) + dated > room:
                break
            floor += min(need, MIN_L2_SHARE) + dated
            days.add(day)
            chosen.append(_L2Turn(turn, need))
        room -= _DATE_LINE * len(days)
        left = _share(chosen, room)
        self._recent = chosen
        self._consumed += len(chosen)
        self._room = left + unused if chosen else self._room
        taken = {id(entry.turn) for entry in chosen}
        return [turn for turn in newest if id(turn) not in taken]

    def offer_earlier(self, turn: MemoryTurn) -> bool:
        """Add an older turn's L1 line; False (and nothing added) once the budget is spent."""
        if self._full:
            return False
        summary = _summary(turn)
        if summary is None:  # nothing to show: it is passed over, not left out
            self._consumed += 1
            return True
        stamp = f"[{clock(turn.ended_at, self.tz)}] "
        line = stamp + cut(summary, LINE_MAX - len(stamp))
        heading = 0 if self._earlier else len(EARLIER_HEADING) + 2
        day = _local_day(turn.ended_at, self.tz)
        previous = self._earlier[-1].day if self._earlier else None
        cost = len(line) + 1 + heading + (_DATE_LINE if day != previous else 0)
        if cost > self._room:
            self._full = True
            self._first_left_out = turn.ended_at
            return False
        self._room -= cost
        self._earlier.append(_Line(turn.ended_at, day, line))
        self._consumed += 1
        return True

    @property
    def full(self) -> bool:
        return self._full

    # --- the text --------------------------------------------------------------------------

    def render(self, total: int) -> RenderedBlock:
        """The block, `total` being how many turns the chain has in all.

        The room the earlier turns left unused (their lines were fewer or shorter than
        the share kept for them, or had nothing to show) goes back to the recent turns."""
        recent = [_L2Turn(e.turn, e.need) for e in self._recent]
        _share(recent, sum(e.share for e in self._recent) + self._room)
        recent.sort(key=lambda e: e.turn.ended_at)
        shown = [e.turn.ended_at for e in recent] + [line.ended_at for line in self._earlier]
        omitted = max(total - self._consumed, 0)
        counts = BlockCounts(len(recent), len(self._earlier), omitted, max(total, self._consumed))
        if not shown:
            return RenderedBlock("", counts)
        days = {_local_day(e.turn.ended_at, self.tz) for e in recent}
        dated = len(days | {line.day for line in self._earlier}) > 1
        parts = [HEADING]
        if recent:
            lines = [RECENT_HEADING]
            day: date | None = None
            for entry in recent:
                day = self._date_line(lines, entry.turn.ended_at, day, dated)
                stamp = clock(entry.turn.ended_at, self.tz)
                lines.extend(_pair_lines(entry.turn, stamp, entry.share - 1))
            parts.append("\n".join(lines))
        if self._earlier:
            lines = [EARLIER_HEADING]
            day = None
            for line in self._earlier:
                if dated and line.day != day:
                    lines.append(f"#### {line.day.isoformat()}")
                day = line.day
                lines.append(line.text)
            parts.append("\n".join(lines))
        closing = [self._omitted_line(omitted)] if omitted else []
        closing.append(self._hint_line(shown, dated=dated))
        parts.append("---\n" + "\n".join(closing))
        text = "\n\n".join(parts)
        assert len(text) <= self.max_chars, (len(text), self.max_chars)
        return RenderedBlock(text, counts)

    def _date_line(self, lines: list[str], moment: datetime, day: date | None, dated: bool) -> date:
        current = _local_day(moment, self.tz)
        if dated and current != day:
            lines.append(f"#### {current.isoformat()}")
        return current

    def _stamp(self, moment: datetime, *, dated: bool, minutes: bool = False) -> str:
        local = moment.astimezone(self.tz)
        time_part = local.strftime("%H:%M" if minutes else "%H:%M:%S")
        return f"{local:%Y-%m-%d} {time_part}" if dated else time_part

    def _omitted_line(self, omitted: int) -> str:
        turns = "turn is" if omitted == 1 else "turns are"
        span = ""
        if self.oldest is not None:
            span = f", from {self._stamp(self.oldest, dated=True, minutes=True)}"
            if self._first_left_out is not None:
                span += f" to {self._stamp(self._first_left_out, dated=True, minutes=True)}"
        return f"{omitted:,} earlier {turns} not shown here{span}; fetch them by time as below."

    def _hint_line(self, shown: Sequence[datetime], *, dated: bool) -> str:
        """The guide line, its examples taken from the block: the newest turn's time, and a
        range from the first turn shown on that turn's day to it."""
        last = max(shown)
        day = _local_day(last, self.tz)
        first = min(m for m in shown if _local_day(m, self.tz) == day)
        one = self._stamp(last, dated=dated)
        span = f"{clock(first, self.tz)[:5]}-{clock(last, self.tz)[:5]}"
        if dated:
            span = f"{day.isoformat()} {span}"
        what = "tool inputs and outputs, system messages, images"
        if self.hint in (DetailHint.sc_detail, DetailHint.plugin_sc_detail):
            command = f"/{self.hint.value}"
            return (
                f"A turn's details ({what}) by its time: `{command} {one}`, "
                f"a range `{command} {span}` (add `--kind tool_output`, `--grep TEXT`, "
                "`--page N`)."
            )
        if self.hint in (DetailHint.mcp_detail, DetailHint.plugin_mcp_detail):
            tools = self.hint.value
            return (
                f"A turn's details ({what}) by its time: call `{tools}memory_detail` with "
                f"time `{one}` or a range `{span}` (and `kind`, `grep`, `page`); find "
                f"earlier work by words with `{tools}memory_search`."
            )
        return (
            f"A turn's details ({what}) by its time: the `Detail` tool, "
            f"e.g. time `{one}` or a range `{span}`."
        )


def render_memory_block(
    turns: Iterable[MemoryTurn],
    *,
    window: int,
    tz: ZoneInfo,
    max_chars: int,
    hint: DetailHint = DetailHint.detail_tool,
    l2_ratio: float = 0.7,
) -> RenderedBlock:
    """The block for a chain's turns given all at once (any order); "" when there are none."""
    newest_first = sorted(turns, key=lambda t: t.ended_at, reverse=True)
    oldest = newest_first[-1].ended_at if newest_first else None
    builder = MemoryBlockBuilder(max_chars, window, tz, hint, oldest, l2_ratio)
    older = len(newest_first) > window
    for turn in builder.take_recent(newest_first[:window], older=older):
        if not builder.offer_earlier(turn):
            break
    if not builder.full:
        for turn in newest_first[window:]:
            if not builder.offer_earlier(turn):
                break
    return builder.render(len(newest_first))
