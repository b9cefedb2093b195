"""The memory block: what a continuing session is told about its predecessor chain.

Seed 003's shape, in English: the last `window` (20) turns in full (L2), older turns as their
one-line summaries (L1), then one line on how to fetch a turn's details by its time. Every line
starts with the turn's stable time (its end) in the display time zone, the same time the detail
look-up takes, so the model can pass what it reads straight back.

Nothing is dropped for lack of a summary: an older turn not summarized yet shows its L2 text,
and a turn that has only a summary (imported history) shows the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = [
    "DEFAULT_WINDOW",
    "HEADING",
    "MemoryTurn",
    "clock",
    "memory_counts",
    "render_memory_block",
]

DEFAULT_WINDOW = 20  # seed 003: about 1.5x the median session length, just under p75
HEADING = "## Strata: session memory"
RECENT_HEADING = "### Recent turns"
EARLIER_HEADING = "### Earlier turns (summaries)"


@dataclass(frozen=True)
class MemoryTurn:
    """A turn of the chain as stored: its end time, its L2 and its L1 (None until summarized)."""

    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None


def clock(moment: datetime, tz: ZoneInfo) -> str:
    """A moment as `HH:MM:SS` in the display time zone: the form detail look-ups accept."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("memory times must be timezone-aware")
    return moment.astimezone(tz).strftime("%H:%M:%S")


def _has_l2(turn: MemoryTurn) -> bool:
    return bool(turn.user_text.strip() or turn.assistant_text.strip())


def _summary(turn: MemoryTurn) -> str | None:
    """A turn's summary line: its L1, else its L2 so that nothing is lost, else None."""
    if turn.l1 is not None and turn.l1.strip():
        return turn.l1.strip()
    parts = [
        f"user: {turn.user_text}" if turn.user_text.strip() else "",
        f"assistant: {turn.assistant_text}" if turn.assistant_text.strip() else "",
    ]
    text = " / ".join(p for p in parts if p)
    return text or None


def _split(turns: Sequence[MemoryTurn], window: int) -> tuple[list[MemoryTurn], list[MemoryTurn]]:
    """(recent, earlier): the last `window` turns in full, the rest as summaries.

    When no turn has L2 at all (a chain of imported summaries), every turn is a summary.
    """
    if window < 0:
        raise ValueError("window must not be negative")
    ordered = sorted(turns, key=lambda t: t.ended_at)
    if not any(_has_l2(t) for t in ordered):
        return [], ordered
    cut = max(len(ordered) - window, 0)
    return ordered[cut:], ordered[:cut]


def _recent_lines(turn: MemoryTurn, tz: ZoneInfo) -> list[str]:
    stamp = f"[{clock(turn.ended_at, tz)}]"
    if not _has_l2(turn):
        summary = _summary(turn)
        return [f"{stamp} {summary}"] if summary else []
    lines = []
    if turn.user_text.strip():
        lines.append(f"{stamp} [user]: {turn.user_text}")
    if turn.assistant_text.strip():
        lines.append(f"{stamp} [assistant]: {turn.assistant_text}")
    return lines


def _hint(session_id: str, first: datetime, last: datetime, tz: ZoneInfo) -> str:
    """The closing line: how to fetch details, with times taken from the block itself."""
    one = clock(last, tz)
    span = f"{clock(first, tz)[:5]}-{one[:5]}"
    return (
        "Fetch a turn's details (tool inputs and outputs, system messages, images) by its time "
        f"with the `Detail` tool or `GET /sessions/{session_id}/detail/<time>` "
        f"(e.g. `{one}`, a range `{span}`)."
    )


def render_memory_block(
    turns: Sequence[MemoryTurn], *, window: int, tz: ZoneInfo, detail_hint_session: str
) -> str:
    """The memory block for the predecessor chain's turns (in time order); "" when empty.

    `detail_hint_session` is the session the detail look-up should be asked of: the one the
    block is shown to, which searches its whole chain.
    """
    recent, earlier = _split(turns, window)
    recent_lines = [line for turn in recent for line in _recent_lines(turn, tz)]
    earlier_lines = []
    for turn in earlier:
        summary = _summary(turn)
        if summary is not None:
            earlier_lines.append(f"[{clock(turn.ended_at, tz)}] {summary}")
    if not recent_lines and not earlier_lines:
        return ""
    shown = [t for t in (*earlier, *recent) if _summary(t) is not None]
    parts = [HEADING]
    if recent_lines:
        parts.append("\n".join([RECENT_HEADING, *recent_lines]))
    if earlier_lines:
        parts.append("\n".join([EARLIER_HEADING, *earlier_lines]))
    first = min(t.ended_at for t in shown)
    last = max(t.ended_at for t in shown)
    parts.append("---\n" + _hint(detail_hint_session, first, last, tz))
    return "\n\n".join(parts)


def memory_counts(turns: Sequence[MemoryTurn], window: int) -> dict[str, int]:
    """How the block shows the chain: turns in full (L2), as summaries (L1), and in all."""
    recent, earlier = _split(turns, window)
    l2 = sum(1 for t in recent if _has_l2(t))
    summaries_only = [t for t in recent if not _has_l2(t)]
    l1 = sum(1 for t in (*earlier, *summaries_only) if _summary(t) is not None)
    return {"l2_turns": l2, "l1_turns": l1, "total_turns": len(turns)}
