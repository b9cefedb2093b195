"""A lineage says which items a forked or rewound session reads, at any earlier end too."""

from __future__ import annotations

from app.domain.lineage import Lineage, Part, Span, clip, forked


def test_clip_cuts_the_spans_at_an_end_and_drops_those_after_it() -> None:
    spans = [Span("p", 0, 10), Span("c", 10, None)]

    assert clip(spans, 4) == [Span("p", 0, 4)]
    assert clip(spans, 12) == [Span("p", 0, 10), Span("c", 10, 12)]


def test_a_rewind_reverts_the_items_between_its_point_and_its_marker() -> None:
    rewound = Lineage.plain("s").rewound("s", 3, 7, 1, [Part("s", 0, 0, 3)])

    assert [seq for seq in range(1, 10) if rewound.reads(seq)] == [1, 2, 3, 7, 8, 9]


def test_the_log_as_it_ended_before_a_rewind_is_what_an_undo_goes_back_to() -> None:
    rewound = Lineage.plain("s").rewound("s", 3, 7, 1, [])

    assert rewound.spans_at(6) == [Span("s", 0, 6)]
    assert rewound.spans_at(8) == [Span("s", 0, 3), Span("s", 6, 8)]


def test_a_forks_items_after_the_point_are_its_own_and_before_it_its_parents() -> None:
    lineage = forked("c", [Span("p", 0, None)], 5, 1, [Part("p", 0, 0, 5)])

    assert lineage.source_of(5) == "p" and lineage.source_of(6) == "c"
    assert lineage.parts("c", 1) == [Part("p", 0, 0, 5)]


def test_a_lineage_round_trips_through_json() -> None:
    lineage = forked("c", [Span("p", 0, None)], 5, 1, [Part("p", 0, 0, 5)]).rewound(
        "c", 6, 9, 2, [Part("c", 1, 0, 6)]
    )

    assert Lineage.from_json(lineage.to_json()) == lineage
