"""The memory block (seed 003's injection format within a budget): L2 window, L1 summaries,
the count of what was left out, the detail guide line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.render import (
    LINE_MAX,
    MIN_BLOCK_CHARS,
    DetailHint,
    MemoryTurn,
    RenderedBlock,
    render_memory_block,
)

UTC_ZONE = ZoneInfo("UTC")
T0 = datetime(2026, 4, 16, 13, 2, 11, tzinfo=UTC)
BUDGET = 9_500


def block(
    turns: list[MemoryTurn],
    *,
    window: int = 20,
    tz: ZoneInfo = UTC_ZONE,
    max_chars: int = BUDGET,
    hint: DetailHint = DetailHint.detail_tool,
) -> RenderedBlock:
    return render_memory_block(turns, window=window, tz=tz, max_chars=max_chars, hint=hint)


def render(turns: list[MemoryTurn], **options: object) -> str:
    return block(turns, **options).text  # type: ignore[arg-type]


def numbered(count: int, *, step: timedelta = timedelta(minutes=1)) -> list[MemoryTurn]:
    """Turns `step` apart, each with L2 and an L1 summary."""
    return [
        MemoryTurn(T0 + i * step, f"question {i}", f"answer {i}", f"summary {i}")
        for i in range(count)
    ]


def test_small_block_has_the_exact_shape() -> None:
    turns = [
        MemoryTurn(T0, "Set up CI", "Added a workflow.", "Set up CI with a GitHub workflow."),
        MemoryTurn(
            datetime(2026, 4, 16, 14, 23, 5, tzinfo=UTC),
            "Why does test_io fail?",
            "The fixture path is relative.\n```diff\n-a\n+b\n```",
            None,
        ),
        MemoryTurn(datetime(2026, 4, 16, 15, 47, 12, tzinfo=UTC), "", "All green now.", None),
    ]
    assert render(turns, window=2) == (
        "## Strata: session memory\n"
        "\n"
        "### Recent turns\n"
        "[14:23:05] [user]: Why does test_io fail?\n"
        "[14:23:05] [assistant]: The fixture path is relative.\n"
        "```diff\n"
        "-a\n"
        "+b\n"
        "```\n"
        "[15:47:12] [assistant]: All green now.\n"
        "\n"
        "### Earlier turns (summaries, newest first)\n"
        "[13:02:11] Set up CI with a GitHub workflow.\n"
        "\n"
        "---\n"
        "A turn's details (tool inputs and outputs, system messages, images) by its time: "
        "the `Detail` tool, e.g. time `15:47:12` or a range `13:02-15:47`."
    )


def test_for_claude_code_the_guide_line_names_sc_detail_with_a_time_from_the_block() -> None:
    text = render(numbered(3), hint=DetailHint.sc_detail)
    assert text.splitlines()[-1] == (
        "A turn's details (tool inputs and outputs, system messages, images) by its time: "
        "`/sc-detail 13:04:11`, a range `/sc-detail 13:02-13:04` "
        "(add `--kind tool_output`, `--grep TEXT`, `--page N`)."
    )


def test_for_the_kit_as_a_plugin_the_guide_line_names_its_namespaced_command() -> None:
    text = render(numbered(3), hint=DetailHint.plugin_sc_detail)
    assert (
        "`/strata:sc-detail 13:04:11`, a range `/strata:sc-detail 13:02-13:04`"
        in (text.splitlines()[-1])
    )


def test_with_strata_s_mcp_server_the_guide_line_names_its_tools() -> None:
    text = render(numbered(3), hint=DetailHint.mcp_detail)
    assert text.splitlines()[-1] == (
        "A turn's details (tool inputs and outputs, system messages, images) by its time: "
        "call `mcp__strata__memory_detail` with time `13:04:11` or a range `13:02-13:04` "
        "(and `kind`, `grep`, `page`); find earlier work by words with "
        "`mcp__strata__memory_search`."
    )


def test_with_the_plugin_s_mcp_server_the_guide_line_names_the_plugin_s_tools() -> None:
    line = render(numbered(3), hint=DetailHint.plugin_mcp_detail).splitlines()[-1]
    assert "call `mcp__plugin_strata_strata__memory_detail` with time `13:04:11`" in line
    assert "`mcp__plugin_strata_strata__memory_search`" in line


def test_no_turns_render_no_block() -> None:
    assert render([]) == ""


def test_turns_with_nothing_to_show_render_no_block() -> None:
    assert render([MemoryTurn(T0, "", "", None)]) == ""


def test_the_last_20_of_25_turns_are_shown_whole_and_5_as_summaries_newest_first() -> None:
    rendered = block(numbered(25))
    recent, earlier = rendered.text.split("### Earlier turns (summaries, newest first)")
    assert [f"question {i}\n" in recent for i in range(25)] == [False] * 5 + [True] * 20
    assert [earlier.index(f"summary {i}\n") for i in (4, 3, 2, 1, 0)] == sorted(
        earlier.index(f"summary {i}\n") for i in range(5)
    )
    assert "question" not in earlier
    assert vars(rendered.counts) == {
        "l2_turns": 20,
        "l1_turns": 5,
        "omitted_turns": 0,
        "total_turns": 25,
    }


def test_a_chain_within_the_window_has_no_summary_section() -> None:
    text = render(numbered(3))
    assert "### Recent turns" in text
    assert "### Earlier turns" not in text


def test_recent_turns_are_shown_in_time_order() -> None:
    turns = numbered(3)
    text = render([turns[2], turns[0], turns[1]])
    assert text.index("question 0") < text.index("question 1") < text.index("question 2")


def test_an_older_turn_without_l1_falls_back_to_its_l2_text() -> None:
    turns = [MemoryTurn(T0, "first q", "first a", None), *numbered(21)[1:]]
    earlier = render(turns).split("### Earlier turns (summaries, newest first)\n")[1]
    assert earlier.startswith("[13:02:11] user: first q / assistant: first a\n")


def test_a_fallback_summary_omits_a_missing_side() -> None:
    turns = [MemoryTurn(T0, "", "only the answer", None), *numbered(3)[1:]]
    assert "[13:02:11] assistant: only the answer\n" in render(turns, window=2)


def test_a_chain_of_imported_summaries_shows_only_the_summaries_section() -> None:
    turns = [
        MemoryTurn(T0 + timedelta(minutes=i), "", "", f"imported summary {i}") for i in range(3)
    ]
    rendered = block(turns)
    assert rendered.text == (
        "## Strata: session memory\n"
        "\n"
        "### Earlier turns (summaries, newest first)\n"
        "[13:04:11] imported summary 2\n"
        "[13:03:11] imported summary 1\n"
        "[13:02:11] imported summary 0\n"
        "\n"
        "---\n"
        "A turn's details (tool inputs and outputs, system messages, images) by its time: "
        "the `Detail` tool, e.g. time `13:04:11` or a range `13:02-13:04`."
    )
    assert (rendered.counts.l2_turns, rendered.counts.l1_turns) == (0, 3)


def test_times_are_shown_in_the_display_time_zone() -> None:
    text = render(numbered(1), tz=ZoneInfo("Asia/Tokyo"))
    assert "[22:02:11] [user]: question 0" in text
    assert "e.g. time `22:02:11` or a range `22:02-22:02`" in text


def test_a_negative_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="window"):
        render(numbered(1), window=-1)


def test_a_budget_below_the_minimum_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        render(numbered(1), max_chars=MIN_BLOCK_CHARS - 1)


def test_a_naive_time_is_rejected() -> None:
    naive = datetime(2026, 4, 16, 13, 2, 11)  # noqa: DTZ001
    with pytest.raises(ValueError, match="timezone-aware"):
        render([MemoryTurn(naive, "q", "a", None)])


# --- the budget ------------------------------------------------------------------------------


def test_eight_sessions_of_long_turns_fit_under_claude_codes_inline_limit() -> None:
    # 66,789 characters unbudgeted, after eight sessions of one project
    turns = [
        MemoryTurn(T0 + timedelta(minutes=5 * i), "q" * 400, "a" * 2_500, f"summary {i}")
        for i in range(160)
    ]
    rendered = block(turns)
    assert len(rendered.text) <= BUDGET < 10_000
    assert rendered.counts.l2_turns > 0 and rendered.counts.l1_turns > 0


def test_a_turn_longer_than_its_share_is_cut_with_a_marker_naming_its_time() -> None:
    long = MemoryTurn(T0, "paste: " + "x" * 50_000, "It is a log.", None)
    text = render([long, *numbered(3, step=timedelta(hours=1))[1:]])
    line = next(line for line in text.splitlines() if line.startswith("[13:02:11] [user]: paste"))
    assert " [… cut; the whole turn: detail of 13:02:11] " in line
    assert "[13:02:11] [assistant]: It is a log." in text  # the short side is whole
    assert len(text) <= BUDGET


def test_a_cut_turn_keeps_its_head_and_its_end() -> None:
    """A long answer's conclusion is at its end: the cut keeps both ends of the text."""
    long = MemoryTurn(T0, "Why?", "Because: " + "detail " * 5_000 + "So the fix is X.", None)

    line = next(line for line in render([long]).splitlines() if "[assistant]:" in line)

    assert line.startswith("[13:02:11] [assistant]: Because: detail")
    assert " [… cut; the whole turn: detail of 13:02:11] " in line
    assert line.endswith("So the fix is X.")


def test_a_turn_with_nothing_to_show_leaves_the_recent_turns_all_the_room() -> None:
    """An empty turn (a session's turn before its first prompt) has nothing for the room
    the recent turns would leave to summaries: the block is the same without it."""
    long = [
        MemoryTurn(T0 + timedelta(minutes=i), "u" * 3_000, "v" * 3_000, None) for i in range(1, 6)
    ]
    empty = MemoryTurn(T0, "", "", None)

    assert render([empty, *long]) == render(long)


def test_an_empty_turn_past_the_window_leaves_the_recent_turns_all_the_room() -> None:
    """Twenty long turns and, before them, a session's empty turn 0: the older turn has
    nothing to fill the room the recent turns would leave it, so they get all of it."""
    long = [
        MemoryTurn(T0 + timedelta(minutes=i), "u" * 3_000, "v" * 3_000, None) for i in range(1, 21)
    ]
    empty = MemoryTurn(T0, "", "", None)

    assert render([empty, *long]) == render(long)


def test_room_the_summaries_leave_goes_to_the_recent_turns() -> None:
    """Two short summaries and twenty long turns: the block is filled, not held at the
    recent turns' share."""
    old = [MemoryTurn(T0 + timedelta(minutes=i), "q", "a", f"summary {i}") for i in range(2)]
    recent = [
        MemoryTurn(T0 + timedelta(hours=1, minutes=i), "u" * 3_000, "v" * 3_000, None)
        for i in range(20)
    ]

    rendered = block(old + recent)

    assert rendered.counts.l1_turns == 2
    assert len(rendered.text) > BUDGET - 400  # the reserve of a count line it has not


def test_short_turns_take_what_they_need_and_long_ones_share_the_rest() -> None:
    turns = [
        MemoryTurn(T0, "x" * 20_000, "long one", None),
        MemoryTurn(T0 + timedelta(minutes=1), "y" * 20_000, "long two", None),
        MemoryTurn(T0 + timedelta(minutes=2), "short", "ok", None),
    ]
    lines = render(turns).splitlines()
    x = next(line for line in lines if "[user]: xxx" in line)
    y = next(line for line in lines if "[user]: yyy" in line)
    assert "[13:04:11] [user]: short" in lines
    assert abs(len(x) - len(y)) <= 2
    assert len(x) > 3_000


def test_older_turns_keep_a_share_of_the_block_when_recent_turns_are_long() -> None:
    old = [MemoryTurn(T0 + timedelta(minutes=i), "q", "a", f"summary {i}") for i in range(30)]
    recent = [
        MemoryTurn(T0 + timedelta(hours=1, minutes=i), "u" * 3_000, "v" * 3_000, None)
        for i in range(20)
    ]
    rendered = block(old + recent)
    assert rendered.counts.l2_turns == 20
    assert rendered.counts.l1_turns == 30


def test_what_does_not_fit_is_counted_with_its_span_and_how_to_get_it() -> None:
    turns = numbered(2_000, step=timedelta(minutes=7))
    rendered = block(turns, hint=DetailHint.sc_detail)
    counts = rendered.counts
    assert counts.omitted_turns > 0
    assert counts.l2_turns + counts.l1_turns + counts.omitted_turns == 2_000
    lines = rendered.text.splitlines()
    first_left_out = turns[counts.omitted_turns - 1].ended_at
    assert lines[-2] == (
        f"{counts.omitted_turns:,} earlier turns are not shown here, from 2026-04-16 13:02 "
        f"to {first_left_out:%Y-%m-%d %H:%M}; fetch them by time as below."
    )
    # shown: the newest, contiguous; left out: the oldest
    assert f"summary {counts.omitted_turns}\n" in rendered.text
    assert f"summary {counts.omitted_turns - 1}\n" not in rendered.text


def test_a_summary_line_is_cut_to_a_line() -> None:
    turns = [MemoryTurn(T0, "q", "a", "s" * 5_000), *numbered(21)[1:]]
    line = next(line for line in render(turns).splitlines() if line.startswith("[13:02:11] s"))
    assert len(line) == LINE_MAX and line.endswith("…")


def test_turns_over_several_days_get_a_date_line_per_day_and_a_dated_guide() -> None:
    turns = numbered(3, step=timedelta(hours=12))  # 04-16 13:02, 04-17 01:02, 04-17 13:02
    text = render(turns, hint=DetailHint.sc_detail)
    lines = text.splitlines()
    assert lines[lines.index("#### 2026-04-16") + 1] == "[13:02:11] [user]: question 0"
    assert lines[lines.index("#### 2026-04-17") + 1] == "[01:02:11] [user]: question 1"
    assert text.count("#### 2026-04-17") == 1
    assert "`/sc-detail 2026-04-17 13:02:11`" in lines[-1]
    assert "`/sc-detail 2026-04-17 01:02-13:02`" in lines[-1]


def test_turns_of_one_day_get_no_date_line() -> None:
    assert "####" not in render(numbered(30))


_texts = st.one_of(
    st.just(""), st.text(max_size=30), st.integers(0, 30_000).map(lambda n: "w " * (n // 2))
)
_turns = st.builds(
    MemoryTurn,
    ended_at=st.integers(0, 10 * 24 * 3600).map(lambda s: T0 + timedelta(seconds=s)),
    user_text=_texts,
    assistant_text=_texts,
    l1=st.one_of(st.none(), _texts),
)


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(_turns, max_size=60),
    max_chars=st.integers(MIN_BLOCK_CHARS, 20_000),
    window=st.integers(0, 25),
    zone=st.sampled_from(["UTC", "Asia/Tokyo", "America/New_York"]),
    hint=st.sampled_from(list(DetailHint)),
)
def test_the_block_never_exceeds_its_budget_and_counts_every_turn(
    turns: list[MemoryTurn], max_chars: int, window: int, zone: str, hint: DetailHint
) -> None:
    rendered = block(turns, window=window, tz=ZoneInfo(zone), max_chars=max_chars, hint=hint)
    counts = rendered.counts
    assert len(rendered.text) <= max_chars
    assert counts.total_turns == len(turns)
    assert counts.l2_turns <= window
    assert counts.l2_turns + counts.l1_turns + counts.omitted_turns <= len(turns)
