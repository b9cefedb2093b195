"""A turn's detail as looked up by time: L2 and its L3 grouped by kind, and its text form."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

KIND_ORDER = ("tool_input", "tool_output", "system", "image")


@dataclass(frozen=True)
class DetailEntry:
    source_id: str
    tool_name: str | None
    text: str


@dataclass(frozen=True)
class TurnDetail:
    session_id: str
    turn: int
    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None
    details: dict[str, list[DetailEntry]] = field(default_factory=dict)


def render_details(turns: list[TurnDetail], *, tz: ZoneInfo) -> str:
    """The Detail tool's answer: each turn's time, L2, then L3 by kind."""
    blocks: list[str] = []
    for turn in turns:
        local = turn.ended_at.astimezone(tz)
        lines = [
            f"## [{local:%H:%M:%S}] {local:%Y-%m-%d} (session {turn.session_id}, turn {turn.turn})"
        ]
        if turn.user_text:
            lines.append(f"[user]: {turn.user_text}")
        if turn.assistant_text:
            lines.append(f"[assistant]: {turn.assistant_text}")
        for kind in KIND_ORDER:
            entries = turn.details.get(kind, [])
            if not entries:
                continue
            lines.append(f"### {kind}")
            for entry in entries:
                name = f" {entry.tool_name}" if entry.tool_name else ""
                lines.append(f"-{name} ({entry.source_id}): {entry.text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
