"""The enriched instruction (seed 004): exactly the time, the latest comments, the file
lists and the task; never older comments, logs or file contents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.engine.instruction import CommentView, render_enriched_instruction, render_time_block

TOKYO = ZoneInfo("Asia/Tokyo")
NOW = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)  # Friday 18:30 in Tokyo
LONG = "The quarterly numbers are attached. " * 17 + "END"  # 615 characters


def at(hour: int, minute: int, day: int = 14) -> datetime:
    return datetime(2025, 3, day, hour, minute, tzinfo=TOKYO)


COMMENTS = [
    CommentView("user", "OLDEST: please ignore the draft in drafts/.", at(9, 0, day=13)),
    CommentView("user", "Summarise the Q1 report for the board.", at(23, 50, day=13)),
    CommentView("agent", "Which format do you want: slides or a memo?", at(9, 5)),
    CommentView("user", LONG, at(9, 12)),
    CommentView("system", "Job re-queued after a user reply.", at(9, 13)),
    CommentView("user", "A memo.\nKeep it under one page.", at(18, 1)),
]

EXPECTED = f"""\
## Current date and time
- Date: 2025-03-14 (Friday)
- Time: 18:30 (Asia/Tokyo, UTC+09:00)

## Conversation so far

[user · 2025-03-13 23:50]
Summarise the Q1 report for the board.

[agent · 09:05]
Which format do you want: slides or a memo?

[user · 09:12]
{LONG[:500]}… [cut: 115 more characters]

[system · 09:13]
Job re-queued after a user reply.

[user · 18:01]
A memo.
Keep it under one page.

## Workspace

File contents are not included; use the workspace tools to open what you need.

input/
- input/data/q1.csv
- input/report.pdf

output/
(empty)

## Task

Write a one-page memo summarising input/report.pdf."""


def render(**overrides: object) -> str:
    args: dict[str, object] = {
        "instruction": "Write a one-page memo summarising input/report.pdf.",
        "comments": COMMENTS,
        "input_files": ["report.pdf", "data/q1.csv"],
        "output_files": [],
        "now": NOW,
        "tz": TOKYO,
    }
    args.update(overrides)
    return render_enriched_instruction(**args)  # type: ignore[arg-type]


def test_the_rendered_text_is_pinned() -> None:
    assert len(LONG) == 615
    assert render() == EXPECTED


def test_older_comments_are_not_included() -> None:
    text = render()
    assert "OLDEST" not in text
    assert "drafts/" not in text


def test_comments_given_newest_first_are_still_the_latest_oldest_first() -> None:
    assert render(comments=list(reversed(COMMENTS))) == EXPECTED


def test_comments_with_the_same_time_keep_the_given_order() -> None:
    same = at(10, 0)
    first, second = CommentView("user", "first", same), CommentView("agent", "second", same)
    text = render(comments=[first, second])
    assert text.index("first") < text.index("second")


def test_file_contents_and_logs_are_never_included() -> None:
    # The renderer only ever receives paths; even a logs/ path handed to it by mistake
    # would show up only as a name under input/ or output/, not as content.
    text = render(input_files=["notes.txt"], output_files=["memo.md"])
    assert "- input/notes.txt" in text
    assert "- output/memo.md" in text
    assert "logs/" not in text
    assert "lessons.jsonl" not in text


def test_paths_may_be_given_relative_to_the_workspace_root() -> None:
    # Workspace.list_files("input") answers "input/report.pdf"; it is not prefixed twice.
    assert render(input_files=["input/report.pdf", "input/data/q1.csv"]) == EXPECTED


def test_limits_are_parameters() -> None:
    text = render(max_comments=2, comment_max_chars=10)
    assert "Job re-que… [cut: 23 more characters]" in text
    assert "A memo.\nKe… [cut: 21 more characters]" in text
    assert "Which format" not in text
    assert "Summarise" not in text


def test_each_folder_lists_at_most_max_files_then_counts_the_rest_for_glob() -> None:
    """~9 tokens a path: 22,000 files listed in full left the next movement no room to
    start. Each folder shows its first `max_files` and one line counting the rest."""
    many = [f"part-{n:05d}.csv" for n in range(22_000)]
    text = render(input_files=many, output_files=["memo.md", "notes.md"], max_files=3)
    assert (
        "input/\n- input/part-00000.csv\n- input/part-00001.csv\n- input/part-00002.csv\n"
        "…21997 more: use Glob\n\noutput/\n- output/memo.md\n- output/notes.md\n\n## Task"
    ) in text
    assert "part-00003" not in text


def test_nothing_inside_a_git_folder_is_listed() -> None:
    """A repository in input/ is listed by its files, not its thousands of `.git/…`."""
    paths = ["repo/.git/HEAD", "repo/.git/objects/ab/cdef", ".git/config", "repo/main.py"]
    text = render(input_files=paths, output_files=[".git/index"], max_files=1)
    assert "input/\n- input/repo/main.py\n\noutput/\n(empty)" in text
    assert ".git" not in text
    assert "more: use Glob" not in text


def test_a_comment_of_exactly_the_limit_is_not_marked() -> None:
    body = "x" * 500
    text = render(comments=[CommentView("user", body, at(10, 0))])
    assert f"\n{body}\n" in text
    assert "[cut:" not in text


def test_no_comments_and_no_files_are_said_so() -> None:
    text = render(comments=[], input_files=[], output_files=[])
    assert "## Conversation so far\n\n(no comments)" in text
    assert "input/\n(empty)\n\noutput/\n(empty)" in text


def test_sections_come_in_the_seeds_order() -> None:
    text = render()
    positions = [
        text.index(h)
        for h in ("## Current date and time", "## Conversation so far", "## Workspace", "## Task")
    ]
    assert positions == sorted(positions)


def test_the_time_block_is_in_the_display_zone() -> None:
    assert render_time_block(NOW, ZoneInfo("UTC")) == (
        "## Current date and time\n- Date: 2025-03-14 (Friday)\n- Time: 09:30 (UTC, UTC+00:00)"
    )
    ny = render_time_block(NOW, ZoneInfo("America/New_York"))
    assert "- Date: 2025-03-14 (Friday)" in ny
    assert "- Time: 05:30 (America/New_York, UTC-04:00)" in ny
    kolkata = render_time_block(NOW - timedelta(hours=9), ZoneInfo("Asia/Kolkata"))
    assert "- Date: 2025-03-14 (Friday)" in kolkata
    assert "- Time: 06:00 (Asia/Kolkata, UTC+05:30)" in kolkata


def test_naive_datetimes_are_refused() -> None:
    naive = datetime(2025, 3, 14, 9, 30)  # noqa: DTZ001 - the point of the test
    with pytest.raises(ValueError, match="timezone-aware"):
        render_time_block(naive, TOKYO)
    with pytest.raises(ValueError, match="timezone-aware"):
        render(comments=[CommentView("user", "hi", naive)])
