"""The noise rules (seed 003): what is stored in neither L2 nor L3, and what is kept whole."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.noise import Boilerplate, clean, fingerprint, is_progress_line, strip_ansi

# --- ANSI ----------------------------------------------------------------------------------


def test_strip_ansi_removes_colour_codes() -> None:
    assert strip_ansi("\x1b[1;31mFAILED\x1b[0m tests/test_x.py") == "FAILED tests/test_x.py"


def test_strip_ansi_removes_256_and_truecolour_codes() -> None:
    assert strip_ansi("\x1b[38;5;196mred\x1b[38;2;0;255;0mgreen\x1b[m") == "redgreen"


def test_strip_ansi_keeps_the_text_of_an_osc8_hyperlink() -> None:
    link = "\x1b]8;;https://example.com/run/42\x1b\\run 42\x1b]8;;\x1b\\"
    assert strip_ansi(f"see {link} for logs") == "see run 42 for logs"


def test_strip_ansi_removes_an_osc_title_ended_by_bel() -> None:
    assert strip_ansi("\x1b]0;build: running\x07done") == "done"


def test_strip_ansi_removes_cursor_movement_and_erase() -> None:
    assert strip_ansi("\x1b[2K\x1b[1G\x1b[3Aok\x1b[?25l\x1b[?25h") == "ok"


def test_strip_ansi_removes_single_character_escapes() -> None:
    assert strip_ansi("\x1b7saved\x1b8\x1b(Bplain\x1b=") == "savedplain"


def test_strip_ansi_removes_a_truncated_escape_and_bell() -> None:
    assert strip_ansi("beep\x07 cut\x1b[31") == "beep cut31"


def test_strip_ansi_keeps_tabs_newlines_and_carriage_returns() -> None:
    assert strip_ansi("a\tb\r\nc\rd") == "a\tb\r\nc\rd"


def test_clean_strips_ansi_from_prose() -> None:
    assert clean("\x1b[32m✓\x1b[0m 12 passed\n") == "✓ 12 passed"


# --- carriage-return redraws and progress ----------------------------------------------------


def test_clean_drops_a_percentage_redrawn_with_carriage_returns() -> None:
    assert clean("10%\r20%\r100%\n") == ""


def test_clean_keeps_the_final_state_of_a_redrawn_line() -> None:
    assert clean("Downloading 10%\rDownloading 80%\rDownloaded model.bin\nready") == (
        "Downloaded model.bin\nready"
    )


def test_clean_ignores_a_trailing_carriage_return_before_the_newline() -> None:
    assert clean("first line\r\r\nsecond line\r\n") == "first line\nsecond line"


def test_clean_drops_tqdm_bars_redrawn_in_place() -> None:
    tqdm = (
        "train:   0%|          | 0/50 [00:00<?, ?it/s]\r"
        "train:  48%|████▊     | 24/50 [00:01<00:01, 23.91it/s]\r"
        "train: 100%|██████████| 50/50 [00:02<00:00, 24.52it/s]\n"
        "loss=0.031\n"
    )
    assert clean(tqdm) == "loss=0.031"


@pytest.mark.parametrize(
    "line",
    [
        "████░░ 45%",
        "[=====>    ] 12/40",
        "45%",
        "Downloading... 73%",
        "Installing: 45%",
        "100%|██████████| 50/50 [00:02<00:00, 24.52it/s]",
        "   ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 1.2/1.2 MB 3.4 MB/s eta 0:00:00",
        "a1b2c3: Downloading [=====>      ]  12.3MB/45.6MB",
        "[##########..........] 50%",
        "▓▓▓▓▓▒▒▒▒▒",
    ],
)
def test_progress_display_lines_are_recognised(line: str) -> None:
    assert is_progress_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "Coverage: 73%",
        "We are at 45% of the budget",
        "12/40",
        "=====",
        "---",
        "- [ ] write the tests",
        "| build | 45% |",
        "2024/05/01",
        "1" * 500,
    ],
)
def test_content_that_merely_looks_numeric_is_not_progress(line: str) -> None:
    assert not is_progress_line(line)


def test_clean_drops_progress_lines_between_real_output() -> None:
    log = (
        "Collecting numpy\n   ━━━━━━━━━━━━━━━━━━━━ 18.2/18.2 MB 41.0 MB/s eta 0:00:00\nInstalled\n"
    )
    assert clean(log) == "Collecting numpy\nInstalled"


# --- blank lines and reminders -----------------------------------------------------------------


def test_clean_drops_blank_and_whitespace_only_lines() -> None:
    assert clean("\n\n  alpha\n \t \n\u3000\n\nbeta  \n\n") == "  alpha\nbeta"


def test_clean_keeps_indentation_of_content_lines() -> None:
    assert clean("def f():\n    return 1\n") == "def f():\n    return 1"


def test_clean_removes_a_system_reminder_block_from_user_text() -> None:
    text = (
        "Please fix the flaky test.\n"
        "<system-reminder>\n"
        "The TodoWrite tool hasn't been used recently.\n"
        "\n"
        "Consider using it.\n"
        "</system-reminder>\n"
        "It fails one run in ten."
    )
    assert clean(text) == "Please fix the flaky test.\nIt fails one run in ten."


def test_clean_removes_a_single_line_system_reminder_and_keeps_what_follows() -> None:
    assert clean("<system-reminder>boilerplate</system-reminder> hello") == " hello"


def test_clean_keeps_a_sentence_that_mentions_the_reminder_tag() -> None:
    text = "Harness text arrives in `<system-reminder>` … `</system-reminder>` tags."
    assert clean(text) == text


def test_clean_keeps_an_unclosed_reminder_tag() -> None:
    assert clean("<system-reminder>\nnot a block after all") == (
        "<system-reminder>\nnot a block after all"
    )


# --- kept whole ---------------------------------------------------------------------------------


def test_clean_keeps_a_fenced_code_block_verbatim() -> None:
    block = "```python\ndef f():\n\n    pass\n\n45%\n[=====>    ] 12/40\n\n```"
    assert clean(f"Here:\n\n{block}\n\nDone.") == f"Here:\n{block}\nDone."


def test_clean_strips_trailing_whitespace_inside_a_fence() -> None:
    assert clean("```\nx = 1   \n   \n```") == "```\nx = 1\n\n```"


def test_clean_strips_only_ansi_inside_a_fence() -> None:
    assert clean("```\n\x1b[31mred\x1b[0m\n\n10%\r20%\n```") == "```\nred\n\n10%\r20%\n```"


def test_clean_keeps_a_reminder_shown_inside_a_fence() -> None:
    text = "```xml\n<system-reminder>\nexample\n</system-reminder>\n```"
    assert clean(text) == text


def test_clean_keeps_a_tilde_fence_and_a_longer_backtick_fence() -> None:
    text = "~~~\n\nx\n~~~\n````md\n```\n\ninner\n```\n````"
    assert clean(text) == text


def test_clean_keeps_a_pasted_300_line_stack_trace_whole() -> None:
    frames = []
    for i in range(150):
        frames.append(f'  File "/srv/app/module_{i}.py", line {i + 1}, in handler_{i}')
        frames.append(f"    result = handler_{i + 1}(request, depth={i})")
    trace = "\n".join(["Traceback (most recent call last):", *frames[:-2], "ValueError: boom"])
    assert len(trace.splitlines()) == 300
    assert clean(f"It crashed:\n{trace}\n") == f"It crashed:\n{trace}"


def test_clean_keeps_a_json_dump_whole() -> None:
    dump = json.dumps({"items": [{"id": i, "ok": i % 2 == 0} for i in range(30)]}, indent=2)
    assert clean(dump) == dump


def test_clean_keeps_a_markdown_task_list() -> None:
    tasks = "## TODO\n- [x] parse transcripts\n- [ ] noise rules\n  - [ ] progress bars\n- [ ]"
    assert clean(tasks) == tasks


def test_clean_keeps_a_markdown_table_with_percentages() -> None:
    table = "| job | done |\n|-----|------|\n| a | 45% |\n| b | 100% |"
    assert clean(table) == table


def test_clean_of_an_empty_text_is_empty() -> None:
    assert clean("") == ""


# --- idempotency ------------------------------------------------------------------------------

_FRAGMENTS = [
    "\x1b",
    "\x1b[",
    "31m",
    "\x1b]8;;",
    "\x1b\\",
    "\x07",
    "\r",
    "\r\n",
    "\n",
    " ",
    "\t",
    "```",
    "~~~",
    "<system-",
    "<system-reminder>",
    "</system-reminder>",
    "reminder>",
    "45%",
    "%",
    "█",
    "░",
    "[==>  ]",
    "12/40",
    "Downloading...",
    "x",
    "|",
]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=4))).map("".join),
    )
)
def test_clean_is_idempotent(text: str) -> None:
    once = clean(text)
    assert clean(once) == once


# --- repeated boilerplate -----------------------------------------------------------------------


def test_boilerplate_reports_a_repeat_of_a_seen_text() -> None:
    memory = Boilerplate()
    assert memory.seen("Hook: lint passed") is False
    assert memory.seen("Hook: lint passed") is True


def test_boilerplate_ignores_colour_and_spacing_differences() -> None:
    memory = Boilerplate()
    memory.seen("Remember:  keep tasks  updated\n")
    assert memory.seen("\x1b[2mRemember: keep tasks updated\x1b[0m") is True


def test_boilerplate_starts_from_known_fingerprints() -> None:
    memory = Boilerplate([fingerprint("Hook: lint passed")])
    assert memory.seen("Hook: lint passed", owner="item:7") is True


def test_boilerplate_is_not_a_repeat_for_the_owner_that_recorded_it() -> None:
    memory = Boilerplate()
    assert memory.seen("reminder", owner="item:1") is False
    assert memory.seen("reminder", owner="item:1") is False
    assert memory.seen("reminder", owner="item:2") is True


def test_boilerplate_exposes_its_fingerprints_for_persisting() -> None:
    memory = Boilerplate()
    memory.seen("a")
    memory.seen("b")
    assert memory.hashes == {fingerprint("a"), fingerprint("b")}
    assert Boilerplate.fingerprint("a") == fingerprint("a")
