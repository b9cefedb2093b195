"""The memory block (seed 003's injection format): L2 window, L1 summaries, detail hint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.memory.render import MemoryTurn, memory_counts, render_memory_block

UTC_ZONE = ZoneInfo("UTC")
T0 = datetime(2026, 4, 16, 13, 2, 11, tzinfo=UTC)


def render(turns: list[MemoryTurn], *, window: int = 20, tz: ZoneInfo = UTC_ZONE) -> str:
    return render_memory_block(turns, window=window, tz=tz, detail_hint_session="sess_1")


def numbered(count: int) -> list[MemoryTurn]:
    """Turns a minute apart, each with L2 and an L1 summary."""
    return [
        MemoryTurn(T0 + timedelta(minutes=i), f"question {i}", f"answer {i}", f"summary {i}")
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
        "### Earlier turns (summaries)\n"
        "[13:02:11] Set up CI with a GitHub workflow.\n"
        "\n"
        "---\n"
        "Fetch a turn's details (tool inputs and outputs, system messages, images) by its time "
        "with the `Detail` tool or `GET /sessions/sess_1/detail/<time>` "
        "(e.g. `15:47:12`, a range `13:02-15:47`)."
    )


def test_no_turns_render_no_block() -> None:
    assert render([]) == ""


def test_turns_with_nothing_to_show_render_no_block() -> None:
    assert render([MemoryTurn(T0, "", "", None)]) == ""


def test_the_last_20_of_25_turns_are_shown_whole_and_5_as_summaries() -> None:
    block = render(numbered(25))
    recent, earlier = block.split("### Earlier turns (summaries)")
    assert [f"question {i}\n" in recent for i in range(25)] == [False] * 5 + [True] * 20
    assert [f"summary {i}\n" in earlier for i in range(25)] == [True] * 5 + [False] * 20
    assert "question" not in earlier


def test_counts_for_25_turns_are_20_whole_and_5_summaries() -> None:
    assert memory_counts(numbered(25), 20) == {"l2_turns": 20, "l1_turns": 5, "total_turns": 25}


def test_a_chain_within_the_window_has_no_summary_section() -> None:
    block = render(numbered(3))
    assert "### Recent turns" in block
    assert "### Earlier turns" not in block


def test_an_older_turn_without_l1_falls_back_to_its_l2_text() -> None:
    turns = [MemoryTurn(T0, "first q", "first a", None), *numbered(20)[1:], numbered(21)[-1]]
    earlier = render(turns).split("### Earlier turns (summaries)\n")[1]
    assert earlier.startswith("[13:02:11] user: first q / assistant: first a\n")


def test_a_fallback_summary_omits_a_missing_side() -> None:
    turns = [MemoryTurn(T0, "", "only the answer", None), *numbered(3)[1:]]
    assert "[13:02:11] assistant: only the answer\n" in render(turns, window=2)


def test_a_chain_of_imported_summaries_shows_only_the_summaries_section() -> None:
    turns = [
        MemoryTurn(T0 + timedelta(minutes=i), "", "", f"imported summary {i}") for i in range(3)
    ]
    assert render(turns) == (
        "## Strata: session memory\n"
        "\n"
        "### Earlier turns (summaries)\n"
        "[13:02:11] imported summary 0\n"
        "[13:03:11] imported summary 1\n"
        "[13:04:11] imported summary 2\n"
        "\n"
        "---\n"
        "Fetch a turn's details (tool inputs and outputs, system messages, images) by its time "
        "with the `Detail` tool or `GET /sessions/sess_1/detail/<time>` "
        "(e.g. `13:04:11`, a range `13:02-13:04`)."
    )


def test_counts_for_imported_summaries_are_all_l1() -> None:
    turns = [MemoryTurn(T0 + timedelta(minutes=i), "", "", "s") for i in range(3)]
    assert memory_counts(turns, 20) == {"l2_turns": 0, "l1_turns": 3, "total_turns": 3}


def test_a_summary_only_turn_among_recent_turns_shows_its_l1_alone() -> None:
    turns = [MemoryTurn(T0, "", "", "imported: set up CI"), *numbered(3)[1:]]
    block = render(turns)
    assert "### Recent turns\n[13:02:11] imported: set up CI\n[13:03:11] [user]:" in block
    assert memory_counts(turns, 20) == {"l2_turns": 2, "l1_turns": 1, "total_turns": 3}


def test_times_are_shown_in_the_display_time_zone() -> None:
    block = render(numbered(1), tz=ZoneInfo("Asia/Tokyo"))
    assert "[22:02:11] [user]: question 0" in block
    assert "(e.g. `22:02:11`, a range `22:02-22:02`)" in block


def test_turns_are_shown_in_time_order() -> None:
    turns = numbered(3)
    block = render([turns[2], turns[0], turns[1]])
    assert block.index("question 0") < block.index("question 1") < block.index("question 2")


def test_a_negative_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="window"):
        render(numbered(1), window=-1)


def test_a_naive_time_is_rejected() -> None:
    naive = datetime(2026, 4, 16, 13, 2, 11)  # noqa: DTZ001
    with pytest.raises(ValueError, match="timezone-aware"):
        render([MemoryTurn(naive, "q", "a", None)])
