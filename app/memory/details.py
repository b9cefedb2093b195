"""A turn's detail as looked up by time: L2 and its L3 grouped by kind, and its text form.

One turn's detail reached 250-590 KB on real Claude Code transcripts (whole file reads, long
command outputs), so what a look-up answers is one *page* of at most `max_chars` characters.
The matching turns are laid out newest first as pieces (the user's and the assistant's text,
then each L3 entry by kind: tool inputs, tool outputs, system messages, images), the pieces are
packed into pages in that order, and a piece longer than what is left of a page continues on
the next (marked `(continued)`). Filters come before paging: `kind` keeps one kind of piece
(`user`, `assistant`, or an L3 kind), `grep` keeps only the lines of each piece that contain
the text (case-insensitive), numbered as in the piece. The pages of one look-up are the same
at every call, so `page` walks them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = [
    "KIND_ORDER",
    "PIECE_KINDS",
    "DetailEntry",
    "DetailPage",
    "DetailQuery",
    "TurnDetail",
    "detail_page",
    "is_lookup_output",
    "render_details",
]

KIND_ORDER = ("tool_input", "tool_output", "system", "image")
PIECE_KINDS = ("user", "assistant", *KIND_ORDER)
MIN_SPLIT = 200  # a piece is split across pages only when at least this much room is left
_CONTINUED = "(continued) "


# a turn's heading in a look-up's answer (`_turn_heading`, `render_details`)
_TURN_HEADING = re.compile(
    r"^## \[\d{2}:\d{2}:\d{2}\] \d{4}-\d{2}-\d{2} \(session \S+, turn \d+\)", re.MULTILINE
)


def is_lookup_output(text: str) -> bool:
    """Whether a text holds Strata's own answer to a detail look-up (a page of turns under
    their headings): what `/sc-detail`, the `Detail` tool or the MCP detail tool printed
    in a later turn. Memory holds those turns already, so it never stores them again."""
    return _TURN_HEADING.search(text) is not None


@dataclass(frozen=True)
class DetailEntry:
    source_id: str
    tool_name: str | None
    text: str
    is_error: bool = False
    offset: int = 0  # where `text` starts in the entry's whole text (a page holds a part)
    length: int | None = None  # the whole text's length (None: `text` is all of it)


@dataclass(frozen=True)
class TurnDetail:
    session_id: str
    turn: int
    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None
    details: dict[str, list[DetailEntry]] = field(default_factory=dict)
    reverted: bool = False  # a rewind took it back: the model no longer sees it


@dataclass(frozen=True)
class DetailQuery:
    """Which page of a look-up, how long, and which pieces."""

    max_chars: int
    page: int = 1
    kind: str | None = None
    grep: str | None = None

    def __post_init__(self) -> None:
        if self.max_chars < 1_000:
            raise ValueError("max_chars must be at least 1000")
        if self.page < 1:
            raise ValueError("page must be 1 or more")
        if self.kind is not None and self.kind not in PIECE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(PIECE_KINDS)}")


@dataclass(frozen=True)
class DetailPage:
    """One page: its part of the turns (texts cut to the page), and its text."""

    page: int
    pages: int
    turns: list[TurnDetail]
    text: str
    matched_turns: int  # turns with at least one piece after the filters
    total_chars: int  # the characters of every piece on every page


@dataclass
class _Piece:
    turn: int  # index into the matching turns
    kind: str
    label: str  # "[user]: ", "- Bash (toolu_1:result, error): "
    body: str
    entry: DetailEntry | None = None
    offset: int = 0


def _grep(text: str, needle: str) -> str:
    """The lines of `text` containing `needle` (any case), each as `L<n>: line`."""
    wanted = needle.casefold()
    hits = [
        f"L{number}: {line}"
        for number, line in enumerate(text.split("\n"), 1)
        if wanted in line.casefold()
    ]
    return "\n".join(hits)


def _entry_label(entry: DetailEntry) -> str:
    name = f" {entry.tool_name}" if entry.tool_name else ""
    error = ", error" if entry.is_error else ""
    return f"-{name} ({entry.source_id}{error}): "


def _pieces(turns: list[TurnDetail], query: DetailQuery) -> list[_Piece]:
    pieces: list[_Piece] = []
    for index, turn in enumerate(turns):
        candidates = [
            _Piece(index, "user", "[user]: ", turn.user_text),
            _Piece(index, "assistant", "[assistant]: ", turn.assistant_text),
        ]
        for kind in KIND_ORDER:
            for entry in turn.details.get(kind, []):
                candidates.append(_Piece(index, kind, _entry_label(entry), entry.text, entry))
        for piece in candidates:
            if query.kind is not None and piece.kind != query.kind:
                continue
            if query.grep:
                piece.body = _grep(piece.body, query.grep)
            if piece.body:
                pieces.append(piece)
    return pieces


def _turn_heading(turn: TurnDetail, tz: ZoneInfo, *, continued: bool) -> str:
    local = turn.ended_at.astimezone(tz)
    more = " (continued)" if continued else ""
    taken = ", reverted" if turn.reverted else ""
    return (
        f"## [{local:%H:%M:%S}] {local:%Y-%m-%d} "
        f"(session {turn.session_id}, turn {turn.turn}{taken}){more}"
    )


def _kind_heading(kind: str) -> str | None:
    return None if kind in ("user", "assistant") else f"### {kind}"


class _Pager:
    """Packs pieces into pages of at most `size` characters, splitting long pieces."""

    def __init__(self, turns: list[TurnDetail], tz: ZoneInfo, size: int) -> None:
        self.turns = turns
        self.tz = tz
        self.size = size
        self.pages: list[list[tuple[str, _Piece | None]]] = [[]]
        self.used = 0
        self.last: tuple[int, str] | None = None  # (turn, kind) of the page's last piece
        self.started: set[int] = set()  # turns whose heading has been written once

    def _context(self, piece: _Piece) -> list[str]:
        lines = []
        if self.last is None or self.last[0] != piece.turn:
            continued = piece.turn in self.started
            lines.append(_turn_heading(self.turns[piece.turn], self.tz, continued=continued))
        heading = _kind_heading(piece.kind)
        if heading and (self.last is None or self.last != (piece.turn, piece.kind)):
            lines.append(heading)
        return lines

    def _emit(self, lines: list[str], piece: _Piece) -> None:
        page = self.pages[-1]
        for line in lines:
            page.append((line, None))
        page.append((piece.label + piece.body, piece))
        self.used += sum(len(line) + 1 for line in lines) + len(piece.label) + len(piece.body) + 1
        self.last = (piece.turn, piece.kind)
        self.started.add(piece.turn)

    def _new_page(self) -> None:
        self.pages.append([])
        self.used = 0
        self.last = None

    def add(self, piece: _Piece) -> None:
        while True:
            lines = self._context(piece)
            cost = sum(len(line) + 1 for line in lines) + len(piece.label) + len(piece.body) + 1
            if self.used + cost <= self.size:
                self._emit(lines, piece)
                return
            room = self.size - self.used - (cost - len(piece.body))
            if room < MIN_SPLIT and self.pages[-1]:
                self._new_page()
                continue
            room = max(room, 1)
            head = replace(piece, body=piece.body[:room])
            self._emit(lines, head)
            piece = replace(
                piece,
                label=_CONTINUED + piece.label,
                body=piece.body[room:],
                offset=piece.offset + room,
            )
            self._new_page()


def _page_turns(
    turns: list[TurnDetail], placed: list[tuple[str, _Piece | None]]
) -> list[TurnDetail]:
    """The turns of a page, each with only its pieces on the page (texts cut to them)."""
    by_turn: dict[int, dict[str, object]] = {}
    for _, piece in placed:
        if piece is None:
            continue
        parts = by_turn.setdefault(piece.turn, {"user": "", "assistant": "", "details": {}})
        if piece.entry is None:
            parts[piece.kind] = piece.body
            continue
        whole = piece.entry.text
        entry = replace(
            piece.entry,
            text=piece.body,
            offset=piece.offset,
            length=None if piece.body == whole else len(whole),
        )
        details = parts["details"]
        assert isinstance(details, dict)
        details.setdefault(piece.kind, []).append(entry)
    result = []
    for index, parts in by_turn.items():
        turn = turns[index]
        details = parts["details"]
        assert isinstance(details, dict)
        result.append(
            replace(
                turn,
                user_text=str(parts["user"]),
                assistant_text=str(parts["assistant"]),
                details=details,
            )
        )
    return result


def detail_page(turns: list[TurnDetail], query: DetailQuery, *, tz: ZoneInfo) -> DetailPage:
    """Page `query.page` of the look-up that found `turns` (newest first); a page past the
    last is empty (`pages` says how many there are)."""
    pieces = _pieces(turns, query)
    pager = _Pager(turns, tz, query.max_chars)
    for piece in pieces:
        pager.add(piece)
    pages = [page for page in pager.pages if page]
    placed = pages[query.page - 1] if query.page <= len(pages) else []
    text = "\n".join(line for line, _ in placed)
    return DetailPage(
        page=query.page,
        pages=len(pages),
        turns=_page_turns(turns, placed),
        text=text,
        matched_turns=len({piece.turn for piece in pieces}),
        total_chars=sum(len(piece.body) for piece in pieces),
    )


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
