"""What a piece job carries from movement to movement, stored on the job row.

Only this travels between movements, never the conversation: lessons, feedback sent
back to a movement, the subtasks spawned, how many movements ran, the git excerpt a
verify movement left, how the last movement was forced on when it was, and two
segment numbers that keep the job out of its session's chat context (the chat's
segment, given back whenever the job stops running, and the segment of the movement in
progress, so a resumed job continues it from the log).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class OpenMovement:
    """A movement that began (its prompt is in the log) and has not transitioned yet."""

    movement: str
    segment: int
    # the context thresholds already fired in it, written with their events, so a
    # resumed movement does not record (or act on) the same threshold again
    fired: list[str] = field(default_factory=list)


@dataclass
class PieceState:
    lessons: list[dict[str, str]] = field(default_factory=list)
    # target movement -> what later movements sent back to it, delivered once
    feedback: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    movements_run: int = 0
    open: OpenMovement | None = None
    # the session's segment before the job took it (None: the job holds none)
    chat_segment: int | None = None
    # the segment of the last movement, for one that continues it (fresh_segment false)
    last_segment: int | None = None
    git_excerpt: str | None = None
    # how the last movement was forced on (it never called transition itself), for the
    # movement it was forced into
    forced: str | None = None

    @classmethod
    def load(cls, data: dict[str, Any]) -> PieceState:
        opened = data.get("open")
        return cls(
            lessons=list(data.get("lessons", [])),
            feedback={k: [_entry(e) for e in v] for k, v in data.get("feedback", {}).items()},
            visited=list(data.get("visited", [])),
            children=list(data.get("children", [])),
            movements_run=int(data.get("movements_run", len(data.get("visited", [])))),
            open=_open(opened) if isinstance(opened, dict) else None,
            chat_segment=data.get("chat_segment"),
            last_segment=data.get("last_segment"),
            git_excerpt=data.get("git_excerpt"),
            forced=data.get("forced"),
        )

    def dump(self) -> dict[str, Any]:
        return {
            "lessons": self.lessons,
            "feedback": self.feedback,
            "visited": self.visited,
            "children": self.children,
            "movements_run": self.movements_run,
            "open": None
            if self.open is None
            else {
                "movement": self.open.movement,
                "segment": self.open.segment,
                "fired": self.open.fired,
            },
            "chat_segment": self.chat_segment,
            "last_segment": self.last_segment,
            "git_excerpt": self.git_excerpt,
            "forced": self.forced,
        }

    def send_back(self, target: str, source: str, text: str, limit: int) -> None:
        """Feedback for `target` from `source`, the newest kept within `limit` characters."""
        entries = [*self.feedback.get(target, []), {"movement": source, "text": text}]
        self.feedback[target] = capped(entries, limit)

    def delivered(self, movement: str) -> None:
        """The movement ended: the feedback it was shown is spent."""
        self.feedback.pop(movement, None)


def _open(data: dict[str, Any]) -> OpenMovement:
    # rows written before the fired thresholds were kept have none
    return OpenMovement(
        str(data["movement"]), int(data["segment"]), [str(a) for a in data.get("fired", [])]
    )


def _entry(value: Any) -> dict[str, str]:
    # rows written before feedback named its source held plain strings
    if isinstance(value, dict):
        return {"movement": str(value.get("movement", "")), "text": str(value.get("text", ""))}
    return {"movement": "a later step", "text": str(value)}


def _line(entry: dict[str, str]) -> str:
    return f"- ({entry['movement']}) {entry['text']}"


def capped(entries: list[dict[str, str]], limit: int) -> list[dict[str, str]]:
    """The newest entries whose lines fit in `limit` characters (one at least, cut)."""
    kept: list[dict[str, str]] = []
    used = 0
    for entry in reversed(entries):
        size = len(_line(entry)) + 1
        if used + size > limit:
            if not kept:
                room = max(0, limit - len(_line({**entry, "text": ""})))
                kept.append({**entry, "text": entry["text"][-room:] if room else ""})
            break
        kept.append(entry)
        used += size
    return list(reversed(kept))


def lessons_text(lessons: list[dict[str, str]], limit: int) -> str:
    """The lessons (or feedback) so far, newest kept: the oldest go first to fit `limit`."""
    kept: list[str] = []
    used = 0
    for entry in reversed(lessons):
        line = _line(entry)
        if used + len(line) + 1 > limit:
            if not kept:
                kept.append(line[-limit:])
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(reversed(kept))
