"""Which items a forked or rewound session's log is made of (pure).

A fork (`POST /sessions/{id}/fork`) is a new session that reads its parent's log up to
one `seq` and appends its own after it, and a rewind (`POST /sessions/{id}/rewind`) makes
a session read its log as it was at an earlier end; neither copies an item. Both are
written as a `Lineage` on the session's row:

* `spans`: the log the session reads, as ranges of `seq` of source sessions
  (`after < seq <= upto`, `upto` None: open), in `seq` order. A fork's own items
  continue its parent's numbering, so the ranges never overlap. Task replay reads these.
* `history`: the spans in effect from each `seq` on (the first from 0): where the log
  stood at any earlier end, which a rewind (or its undo) goes back to.
* `bases`: for each segment a fork or rewind started, the parts of other segments it
  continues (`(source, segment, after, upto)`), in order; the segment's own items follow
  them. A request is built from these parts and the segment's own items.

A session without a lineage reads its own log whole, as before any fork.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Span(NamedTuple):
    """The items of `source` with `after < seq <= upto` (`upto` None: no end)."""

    source: str
    after: int
    upto: int | None

    def holds(self, seq: int) -> bool:
        return self.after < seq and (self.upto is None or seq <= self.upto)


class Part(NamedTuple):
    """The items of `source`'s `segment` with `after < seq <= upto`."""

    source: str
    segment: int
    after: int
    upto: int


def clip(spans: Iterable[Span], upto: int) -> list[Span]:
    """`spans` cut at `upto`: the log as it ends there."""
    kept: list[Span] = []
    for span in spans:
        if span.after >= upto:
            break
        end = upto if span.upto is None else min(span.upto, upto)
        kept.append(Span(span.source, span.after, end))
    return kept


@dataclass(frozen=True)
class Lineage:
    history: tuple[tuple[int, tuple[Span, ...]], ...]
    bases: dict[int, tuple[Part, ...]] = field(default_factory=dict)

    @staticmethod
    def plain(session_id: str) -> Lineage:
        return Lineage(history=((0, (Span(session_id, 0, None),)),))

    @property
    def spans(self) -> tuple[Span, ...]:
        return self.history[-1][1]

    def spans_at(self, seq: int) -> list[Span]:
        """The log as it was when it ended at `seq`."""
        current: tuple[Span, ...] = self.history[0][1]
        for start, spans in self.history:
            if start > seq:
                break
            current = spans
        return clip(current, seq)

    def source_of(self, seq: int) -> str | None:
        """The session whose item `seq` of this log (as it was when it ended there) is."""
        for span in self.spans_at(seq):
            if span.holds(seq):
                return span.source
        return None

    def reads(self, seq: int) -> bool:
        """Whether the log as it is now holds its item `seq` (False: reverted)."""
        return any(span.holds(seq) for span in self.spans)

    def parts(self, session_id: str, segment: int) -> list[Part]:
        """The inherited parts of `segment` (none for a segment that started fresh)."""
        return list(self.bases.get(segment, ()))

    def rewound(
        self, session_id: str, to_seq: int, marker_seq: int, segment: int, parts: Sequence[Part]
    ) -> Lineage:
        """This lineage after a rewind to `to_seq` whose marker item is `marker_seq`, in a
        new `segment` that continues `parts`."""
        spans = (*self.spans_at(to_seq), Span(session_id, marker_seq - 1, None))
        return Lineage(
            history=(*self.history, (marker_seq, spans)),
            bases={**self.bases, segment: tuple(parts)},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "history": [[start, [list(s) for s in spans]] for start, spans in self.history],
            "bases": {str(seg): [list(p) for p in parts] for seg, parts in self.bases.items()},
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Lineage:
        return Lineage(
            history=tuple(
                (int(start), tuple(Span(str(s[0]), int(s[1]), s[2]) for s in spans))
                for start, spans in data["history"]
            ),
            bases={
                int(seg): tuple(Part(str(p[0]), int(p[1]), int(p[2]), int(p[3])) for p in parts)
                for seg, parts in data.get("bases", {}).items()
            },
        )


def lineage_of(session_id: str, stored: dict[str, Any] | None) -> Lineage:
    return Lineage.plain(session_id) if stored is None else Lineage.from_json(stored)


def forked(
    child_id: str, parent_spans: Sequence[Span], at_seq: int, segment: int, parts: Sequence[Part]
) -> Lineage:
    """A fork's lineage: its parent's log up to `at_seq`, then its own items, the first
    of them in `segment`, which continues `parts`."""
    spans = (*clip(parent_spans, at_seq), Span(child_id, at_seq, None))
    return Lineage(history=((0, spans),), bases={segment: tuple(parts)})


def segment_parts(lineage_of_source: Lineage, source: str, segment: int, upto: int) -> list[Part]:
    """What a segment that continues `source`'s `segment` as it was at `upto` is made of:
    that segment's own inherited parts, then its own items up to there."""
    return [*lineage_of_source.parts(source, segment), Part(source, segment, 0, upto)]
