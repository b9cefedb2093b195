"""Tool-output truncation (seed 004): budgets, Read cuts, command cuts, and the promise.

The promise, checked by the property tests at the end: a result never exceeds its
budget (note included), and it is cut, with the note, exactly when the input did not fit.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.truncation import (
    CHARS_PER_TOKEN,
    MIN_BUDGET_TOKENS,
    TRUNCATION_MARKER,
    Truncated,
    estimate_tokens,
    result_budget,
    truncate_command_output,
    truncate_read,
)

# ---------------------------------------------------------------------------- budgets


def test_the_budget_is_half_of_what_is_available() -> None:
    assert result_budget(40_000) == 20_000


def test_the_budget_is_capped() -> None:
    assert result_budget(200_000) == 60_000
    assert result_budget(200_000, cap=10_000) == 10_000


def test_the_budget_has_a_floor() -> None:
    assert result_budget(500) == 1_000
    assert result_budget(0) == 1_000
    assert result_budget(-5) == 1_000
    assert result_budget(500, floor=100) == 250


def test_without_a_context_manager_the_cap_applies() -> None:
    assert result_budget(None) == 60_000
    assert result_budget(None, cap=123) == 123


def test_the_ratio_is_a_parameter() -> None:
    assert result_budget(10_000, ratio=0.25) == 2_500


def test_a_floor_above_the_cap_yields_to_the_cap() -> None:
    assert result_budget(0, cap=500, floor=1_000) == 500


def test_estimate_tokens_rounds_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("abcdef", chars_per_token=2.0) == 3
    with pytest.raises(ValueError):
        estimate_tokens("x", chars_per_token=0)


# ---------------------------------------------------------------------------- Read


def numbered(n: int, width: int = 20) -> str:
    return "".join(f"line {i:05d} ".ljust(width, "x") + "\n" for i in range(1, n + 1))


def test_a_file_that_fits_is_returned_unchanged() -> None:
    content = numbered(10)
    result = truncate_read(content, 1_000)
    assert result == Truncated(content, False, len(content), len(content))


def test_a_long_file_is_cut_at_a_line_boundary_with_how_to_read_on() -> None:
    content = numbered(5_000)  # 21 characters a line, 105,000 characters
    result = truncate_read(content, 1_000)
    assert result.truncated
    assert len(result.text) <= 4_000
    body, note = result.text.split("\n\n" + TRUNCATION_MARKER)
    shown_lines = body.split("\n")
    assert shown_lines[0].startswith("line 00001 ")
    last = len(shown_lines)
    assert shown_lines[-1] == f"line {last:05d} ".ljust(20, "x")  # a whole line
    assert result.shown_chars == len(body) + 1
    assert result.text.startswith(content[: result.shown_chars])
    assert f"showing lines 1-{last} of 5000" in note
    assert f"Read with offset={last + 1} and limit={last}" in note
    assert f"{result.shown_chars} of 105000 characters" in note


def test_line_numbers_count_from_the_offset() -> None:
    content = numbered(5_000)
    result = truncate_read(content, 1_000, offset_line=101)
    m = re.search(r"showing lines (\d+)-(\d+) of (\d+)", result.text)
    assert m is not None
    first, last, of = map(int, m.groups())
    assert (first, of) == (101, 5_100)
    assert f"offset={last + 1} " in result.text


def test_a_file_without_line_breaks_is_cut_at_a_character_boundary() -> None:
    content = "a" * 50_000
    result = truncate_read(content, 1_000)
    assert result.truncated
    assert len(result.text) <= 4_000
    assert result.text.startswith("a" * result.shown_chars + "\n" + TRUNCATION_MARKER)
    assert result.shown_chars > 3_000
    assert f"showing characters 1-{result.shown_chars} of 50000" in result.text
    assert f"offset=1 and char_offset={result.shown_chars}" in result.text
    assert "Grep" in result.text


def test_the_note_gives_the_whole_files_totals_when_the_content_is_part_of_it() -> None:
    """The totals are the whole file's, not those of the part Read collected."""
    content = numbered(5_000)

    result = truncate_read(content, 1_000, file_lines=6_000, file_chars=552_000)

    assert re.search(r"showing lines 1-\d+ of 6000 \(\d+ of 552000 characters\)", result.text)


def test_a_cut_inside_a_line_read_from_a_character_offset_says_where_to_go_on() -> None:
    content = "b" * 50_000  # the rest of line 7, from its character 1000 on

    result = truncate_read(content, 1_000, offset_line=7, char_offset=1_000, file_chars=80_000)

    assert f"characters 1001-{1_000 + result.shown_chars} of 80000" in result.text
    assert f"offset=7 and char_offset={1_000 + result.shown_chars}" in result.text


def test_a_first_line_longer_than_the_budget_is_cut_by_characters() -> None:
    content = "x" * 10_000 + "\n" + numbered(2_000)
    result = truncate_read(content, 1_000)
    assert "showing characters" in result.text
    assert result.shown_chars > 3_000


def test_few_long_lines_are_cut_by_characters() -> None:
    # Ten lines of 3,000 characters against a 4,000-character budget: whole lines would
    # show one line of ten, a third of what fits.
    content = "".join(f"{i}" * 2_999 + "\n" for i in range(10))
    result = truncate_read(content, 1_000)
    assert "showing characters" in result.text
    assert "offset=2 and char_offset=" in result.text  # the cut falls in the second line


# ---------------------------------------------------------------------------- commands


def test_output_that_fits_is_returned_unchanged() -> None:
    result = truncate_command_output("ok\n", 1_000, command="true")
    assert result == Truncated("ok\n", False, 3, 3)


def test_long_output_keeps_head_and_tail_and_says_how_to_narrow() -> None:
    output = numbered(5_000)
    result = truncate_command_output(output, 1_000, command="make test")
    assert result.truncated
    assert len(result.text) <= 4_000
    assert result.text.startswith("line 00001 ")
    assert "line 05000 " in result.text  # the tail is kept: that is where errors are
    m = re.search(r"\[… (\d+) lines, (\d+) characters omitted …\]", result.text)
    assert m is not None
    lines, chars = map(int, m.groups())
    assert chars == len(output) - result.shown_chars
    assert lines * 21 == chars  # whole lines were dropped
    head = result.text[: m.start()]
    assert head.endswith("\n")  # cut at a line boundary
    assert "`make test`" in result.text
    for tool in ("head", "tail", "grep", "awk", "sed", "`make test > out.txt`", "Read"):
        assert tool in result.text
    assert result.text.endswith("]")


def test_the_head_gets_more_room_than_the_tail() -> None:
    output = numbered(5_000)
    result = truncate_command_output(output, 1_000)
    head, rest = result.text.split("\n[… ", 1)
    tail = rest.split("…]\n", 1)[1].split("\n" + TRUNCATION_MARKER)[0]
    assert len(head) > len(tail) > 0
    assert abs(len(head) / (len(head) + len(tail)) - 0.6) < 0.05


def test_a_long_command_is_not_repeated_in_the_note() -> None:
    result = truncate_command_output("y\n" * 10_000, 1_000, command="x" * 500)
    assert "x" * 100 not in result.text
    assert "the command" in result.text


def test_output_without_line_breaks_is_cut_by_characters() -> None:
    output = "0123456789" * 5_000
    result = truncate_command_output(output, 1_000)
    assert len(result.text) <= 4_000
    assert result.shown_chars > 3_000
    assert "[… 0 lines," in result.text


# ---------------------------------------------------------------------------- tiny budgets


@pytest.mark.parametrize("budget", [0, 1, 10, MIN_BUDGET_TOKENS])
def test_tiny_budgets_are_raised_to_the_minimum_and_still_carry_the_note(budget: int) -> None:
    limit = MIN_BUDGET_TOKENS * CHARS_PER_TOKEN
    for result in (
        truncate_read("z" * 100_000, budget),
        truncate_read(numbered(10_000), budget),
        truncate_command_output(numbered(10_000), budget, command="cat big"),
    ):
        assert result.truncated
        assert len(result.text) <= limit
        assert TRUNCATION_MARKER in result.text
        assert result.text.endswith("]")


# ---------------------------------------------------------------------------- the promise

# Sizes must straddle the budgets (200..20,000 characters), so repeated chunks make
# long inputs; plain `st.text` alone would almost always fit.
texts = st.one_of(
    st.text(max_size=2_000),
    st.builds(
        lambda chunk, times: chunk * times,
        st.text(min_size=1, max_size=200),
        st.integers(min_value=1, max_value=1_000),
    ),
    st.builds(
        lambda lines, times: "\n".join(lines) * times,
        st.lists(st.text(alphabet=st.characters(exclude_characters="\n"), max_size=400)),
        st.integers(min_value=1, max_value=100),
    ),
)
budgets = st.integers(min_value=50, max_value=5_000)


def check_promise(source: str, budget: int, result: Truncated) -> None:
    limit = budget * CHARS_PER_TOKEN
    assert len(result.text) <= limit
    assert result.total_chars == len(source)
    if len(source) <= limit:
        assert not result.truncated
        assert result.text == source
        assert result.shown_chars == len(source)
    else:
        assert result.truncated
        assert result.text != source
        assert result.shown_chars < len(source)
        assert "\n" + TRUNCATION_MARKER in result.text
        assert result.text.endswith("]")


@settings(max_examples=300, deadline=None)
@given(texts, budgets, st.integers(min_value=1, max_value=100_000))
def test_read_never_exceeds_its_budget_and_notes_every_cut(
    content: str, budget: int, offset_line: int
) -> None:
    result = truncate_read(content, budget, offset_line=offset_line)
    check_promise(content, budget, result)
    # Read shows a prefix of the file, then the note.
    assert result.text.startswith(content[: result.shown_chars])
    if result.truncated:
        assert result.text[result.shown_chars :].startswith("\n" + TRUNCATION_MARKER)


@settings(max_examples=300, deadline=None)
@given(texts, budgets, st.one_of(st.none(), st.text(max_size=100)))
def test_command_output_never_exceeds_its_budget_and_notes_every_cut(
    output: str, budget: int, command: str | None
) -> None:
    result = truncate_command_output(output, budget, command=command)
    check_promise(output, budget, result)
