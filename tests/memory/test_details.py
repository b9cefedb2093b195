"""Detail look-ups a page at a time: bounded, complete across pages, filtered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.details import DetailEntry, DetailQuery, TurnDetail, detail_page

UTC_ZONE = ZoneInfo("UTC")
T0 = datetime(2026, 4, 16, 14, 23, 5, tzinfo=UTC)


def turn(n: int, *, output: str = "ok", error: bool = False) -> TurnDetail:
    return TurnDetail(
        session_id="ses_1",
        turn=n,
        ended_at=T0 + timedelta(minutes=n),
        user_text=f"run the tests {n}",
        assistant_text=f"done {n}",
        l1=None,
        details={
            "tool_input": [DetailEntry(f"toolu_{n}", "Bash", '{"command":"pytest"}')],
            "tool_output": [DetailEntry(f"toolu_{n}:result", "Bash", output, error)],
        },
    )


def pages_of(turns: list[TurnDetail], query: DetailQuery) -> list[str]:
    first = detail_page(turns, query, tz=UTC_ZONE)
    texts = [first.text]
    for number in range(2, first.pages + 1):
        texts.append(detail_page(turns, _with(query, page=number), tz=UTC_ZONE).text)
    return texts


def _with(query: DetailQuery, **changes: object) -> DetailQuery:
    values: dict[str, object] = {
        "max_chars": query.max_chars,
        "page": query.page,
        "kind": query.kind,
    }
    values["grep"] = query.grep
    values.update(changes)
    return DetailQuery(**values)  # type: ignore[arg-type]


def test_a_small_look_up_is_one_page_with_headings_and_the_error_flag() -> None:
    found = detail_page([turn(1, output="1 failed", error=True)], DetailQuery(8_000), tz=UTC_ZONE)

    assert (found.page, found.pages, found.matched_turns) == (1, 1, 1)
    assert found.text == (
        "## [14:24:05] 2026-04-16 (session ses_1, turn 1)\n"
        "[user]: run the tests 1\n"
        "[assistant]: done 1\n"
        "### tool_input\n"
        '- Bash (toolu_1): {"command":"pytest"}\n'
        "### tool_output\n"
        "- Bash (toolu_1:result, error): 1 failed"
    )


def test_a_half_megabyte_output_is_paged_and_every_character_is_on_some_page() -> None:
    output = "".join(f"line {i:06d} of the build log\n" for i in range(20_000))
    assert len(output) > 500_000
    query = DetailQuery(8_000)

    texts = pages_of([turn(1, output=output)], query)

    assert len(texts) > 60
    assert all(len(text) <= 8_000 for text in texts)
    assert "(continued) - Bash (toolu_1:result)" in texts[1]
    assert texts[1].startswith("## [14:24:05] 2026-04-16 (session ses_1, turn 1) (continued)")
    pages = [
        detail_page([turn(1, output=output)], _with(query, page=n), tz=UTC_ZONE) for n in (1, 2)
    ]
    parts = [e for p in pages for e in p.turns[0].details["tool_output"]]
    assert parts[0].offset == 0 and parts[1].offset == len(parts[0].text)
    assert parts[0].length == len(output)


def test_kind_keeps_only_that_kind_of_piece() -> None:
    found = detail_page([turn(1), turn(2)], DetailQuery(8_000, kind="tool_output"), tz=UTC_ZONE)

    assert "[user]" not in found.text and "tool_input" not in found.text
    assert found.text.count("### tool_output") == 2
    assert found.matched_turns == 2


def test_grep_keeps_the_matching_lines_numbered() -> None:
    output = "collected 3 items\ntest_a PASSED\ntest_b FAILED\nE   AssertionError\n"
    found = detail_page([turn(1, output=output)], DetailQuery(8_000, grep="failed"), tz=UTC_ZONE)

    assert found.text.splitlines()[-1] == "- Bash (toolu_1:result): L3: test_b FAILED"
    assert "PASSED" not in found.text
    assert found.matched_turns == 1


def test_a_grep_matching_nothing_leaves_no_page() -> None:
    found = detail_page([turn(1)], DetailQuery(8_000, grep="no such text"), tz=UTC_ZONE)

    assert (found.pages, found.text, found.matched_turns) == (0, "", 0)


def test_a_page_past_the_last_is_empty() -> None:
    found = detail_page([turn(1)], DetailQuery(8_000, page=5), tz=UTC_ZONE)

    assert (found.pages, found.text, found.turns) == (1, "", [])


@pytest.mark.parametrize(
    ("values", "message"),
    [({"max_chars": 999}, "max_chars"), ({"page": 0}, "page"), ({"kind": "thinking"}, "kind")],
)
def test_a_bad_query_is_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DetailQuery(**{"max_chars": 8_000, **values})  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    outputs=st.lists(st.integers(0, 30_000).map(lambda n: "x" * n), min_size=1, max_size=5),
    max_chars=st.integers(1_000, 9_000),
)
def test_pages_never_exceed_their_size_and_together_hold_every_piece(
    outputs: list[str], max_chars: int
) -> None:
    turns = [turn(n, output=out) for n, out in enumerate(outputs, 1)]
    query = DetailQuery(max_chars)
    first = detail_page(turns, query, tz=UTC_ZONE)
    held: dict[str, str] = {}
    for number in range(1, first.pages + 1):
        found = detail_page(turns, _with(query, page=number), tz=UTC_ZONE)
        assert len(found.text) <= max_chars
        for t in found.turns:
            for entry in t.details.get("tool_output", []):
                assert entry.offset == len(held.get(entry.source_id, ""))
                held[entry.source_id] = held.get(entry.source_id, "") + entry.text
    for n, out in enumerate(outputs, 1):
        assert held.get(f"toolu_{n}:result", "") == out
