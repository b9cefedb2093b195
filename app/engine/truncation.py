"""Tool-output truncation (seed 004): keep one tool result inside its share of the context.

A tool result stays in the movement's message list and is re-sent with every later
request, so one huge file or command output could use up the movement's whole window.
Each result therefore gets a budget (half of the tokens still available, capped, with a
floor), and what does not fit is cut. A cut result always ends with a note saying it
was cut, what was shown and how to get the rest, because a silently shortened file
looks complete to the model.

Budgets are converted to characters at a fixed :data:`CHARS_PER_TOKEN`. The note is part
of the budget: a returned text never exceeds ``budget_tokens * CHARS_PER_TOKEN``
characters (for budgets of at least :data:`MIN_BUDGET_TOKENS`; smaller ones are raised to
it, since no useful note fits in fewer characters).

Pure: no I/O, no settings import; the caller passes the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

CHARS_PER_TOKEN: Final = 4
"""Characters per token used to turn a token budget into a character limit."""

MIN_BUDGET_TOKENS: Final = 32
"""Smallest budget honoured; below it not even the short note would leave room for text."""

TRUNCATION_MARKER: Final = "[Output truncated"
"""Every truncation note starts with this, so callers and tests can recognise a cut."""

_COMMAND_IN_NOTE_MAX_CHARS: Final = 60


def result_budget(
    available_tokens: int | None,
    *,
    ratio: float = 0.5,
    cap: int = 60_000,
    floor: int = 1_000,
) -> int:
    """Tokens one tool result may use: ``ratio`` of what is available, within [floor, cap].

    Without a context manager (``None``) there is nothing to take a share of, so the cap
    applies. The floor keeps a nearly full context from starving tool results into
    uselessness; if a configuration puts the floor above the cap, the cap wins, because
    the cap is what protects the window.
    """
    if available_tokens is None:
        return cap
    share = int(max(0, available_tokens) * ratio)
    return max(min(floor, cap), min(cap, share))


def estimate_tokens(text: str, chars_per_token: float = float(CHARS_PER_TOKEN)) -> int:
    """A rough token count for text whose real count is unknown (rounded up)."""
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be positive, got {chars_per_token}")
    return math.ceil(len(text) / chars_per_token)


@dataclass(frozen=True)
class Truncated:
    """A tool result after truncation.

    ``shown_chars`` counts the characters of the original kept in ``text`` (the note and
    markers excluded); ``total_chars`` is the original's length.
    """

    text: str
    truncated: bool
    shown_chars: int
    total_chars: int


def _char_limit(budget_tokens: int) -> int:
    return max(budget_tokens, MIN_BUDGET_TOKENS) * CHARS_PER_TOKEN


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping the ends; ``str.splitlines`` would also split on
    ``\\r``, form feeds and the like, which ``Read``'s line numbers do not count."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _short_note(shown: int, total: int) -> str:
    return f"\n{TRUNCATION_MARKER}: {shown} of {total} characters shown.]"


# ---------------------------------------------------------------------------- Read


def _read_lines_note(first: int, count: int, last: int, shown: int, total: int) -> str:
    last_shown = first + count - 1
    return (
        f"\n{TRUNCATION_MARKER}: showing lines {first}-{last_shown} of {last} "
        f"({shown} of {total} characters). To read on, use Read with "
        f"offset={last_shown + 1} and limit={count}, or Grep to find the part you need.]"
    )


def _read_chars_note(first: int, shown: int, total: int, line: int, column: int) -> str:
    return (
        f"\n{TRUNCATION_MARKER}: showing characters {first + 1}-{first + shown} of {total}; "
        f"the text has few line breaks. To read on, use Read with offset={line} and "
        f"char_offset={column} (it skips the first {column} characters of line {line}), or "
        "Grep to find the part you need.]"
    )


def truncate_read(
    content: str,
    budget_tokens: int,
    *,
    offset_line: int = 1,
    char_offset: int = 0,
    file_lines: int | None = None,
    file_chars: int | None = None,
) -> Truncated:
    """Cut a file's content (as ``Read`` returns it) to the budget, note included.

    ``offset_line`` is the file line number of the content's first line and
    ``char_offset`` the character of that line the content starts at, so the note can
    name real positions to continue from. ``file_lines`` and ``file_chars`` are the
    whole file's totals when ``content`` is only part of it (the note says "of" them);
    by default the content's own.

    Whole lines are kept from the start, so the model can continue exactly with
    ``Read(offset=..., limit=...)``. When the text has few line breaks (the first line
    alone is over the budget, or fewer than about two lines fit in a budget on average),
    whole lines would show little or nothing, so the cut falls on a character boundary
    instead and the note points to Grep.
    """
    limit = _char_limit(budget_tokens)
    total = len(content)
    if total <= limit:
        return Truncated(text=content, truncated=False, shown_chars=total, total_chars=total)

    lines = _lines(content)
    last = max(file_lines or 0, offset_line + len(lines) - 1)
    whole = max(file_chars or 0, total)
    # Every number in the real note is at most its value here, so the real note is no
    # longer than this one: reserving its length keeps the result inside the budget.
    worst = _read_lines_note(last, last, last, whole, whole)
    few_newlines = len(lines) * limit < 2 * total
    if len(worst) <= limit // 2 and not few_newlines and not char_offset:
        room = limit - len(worst)
        shown = 0
        count = 0
        for line in lines:
            if shown + len(line) > room:
                break
            shown += len(line)
            count += 1
        if count:
            note = _read_lines_note(offset_line, count, last, shown, whole)
            return Truncated(
                text=content[:shown] + note, truncated=True, shown_chars=shown, total_chars=total
            )

    worst = _read_chars_note(whole, whole, whole, last, whole)
    if len(worst) <= limit // 2:
        shown = limit - len(worst)
        breaks = content.count("\n", 0, shown)
        start = content.rfind("\n", 0, shown) + 1
        column = shown - start if breaks else char_offset + shown
        note = _read_chars_note(char_offset, shown, whole, offset_line + breaks, column)
    else:
        shown = max(0, limit - len(_short_note(total, total)))
        note = _short_note(shown, total)
    text = (content[:shown] + note)[:limit]
    return Truncated(text=text, truncated=True, shown_chars=shown, total_chars=total)


# ---------------------------------------------------------------------------- Bash


def _command_marker(omitted_lines: int, omitted: int) -> str:
    return f"\n[… {omitted_lines} lines, {omitted} characters omitted …]\n"


def _command_note(total: int, command: str | None) -> str:
    if command and "\n" not in command and len(command) <= _COMMAND_IN_NOTE_MAX_CHARS:
        cmd, redirect = f"`{command}`", f"`{command} > out.txt`"
    else:
        cmd, redirect = "the command", "`<command> > out.txt`"
    return (
        f"\n{TRUNCATION_MARKER}: showing the head and tail of {total} characters. To narrow "
        f"it, pipe {cmd} through head, tail, grep, awk or sed, or redirect it to a file "
        f"({redirect}) and Read parts of it.]"
    )


def truncate_command_output(
    output: str, budget_tokens: int, *, command: str | None = None
) -> Truncated:
    """Cut command output to the budget: keep the head (60%) and the tail (40%).

    Both ends matter for a command: the head shows what it started doing, the tail
    how it ended (the error, the summary line, the exit). The middle is replaced by a
    marker counting what was left out, and the note says how to narrow the output,
    since re-running the same command would be cut the same way. Cuts fall on line
    boundaries unless that would waste more than half of a part's share.
    """
    limit = _char_limit(budget_tokens)
    total = len(output)
    if total <= limit:
        return Truncated(text=output, truncated=False, shown_chars=total, total_chars=total)

    marker_worst = _command_marker(total, total)
    note = _command_note(total, command)
    room = limit - len(marker_worst) - len(note)
    short = room < limit // 2
    if short:
        marker_worst = "\n…\n"
        note = _short_note(total, total)
        room = max(0, limit - len(marker_worst) - len(note))

    head_share = room * 6 // 10
    tail_share = room - head_share
    newline = output.rfind("\n", 0, head_share)
    head_end = newline + 1 if newline >= 0 and newline + 1 >= head_share // 2 else head_share
    low = total - tail_share
    newline = output.find("\n", low - 1)
    tail_start = newline + 1 if 0 <= newline and newline + 1 - low <= tail_share // 2 else low

    omitted = output[head_end:tail_start]
    shown = head_end + (total - tail_start)
    if short:
        marker, note = marker_worst, _short_note(shown, total)
    else:
        marker = _command_marker(omitted.count("\n"), len(omitted))
    text = (output[:head_end] + marker + output[tail_start:] + note)[:limit]
    return Truncated(text=text, truncated=True, shown_chars=shown, total_chars=total)


# ---------------------------------------------------------------------------- any tool


def _result_note(shown: int, total: int, read_on: str) -> str:
    return f"\n{TRUNCATION_MARKER}: showing characters 1-{shown} of {total}. {read_on}]"


def truncate_result(content: str, budget_tokens: int, *, read_on: str) -> Truncated:
    """Cut any tool's text to the budget, note included, keeping the head.

    The safety net for tools that do not cut their own output: ``read_on`` tells the
    model how to get the rest from that tool (a narrower query, an offset, another tool).
    """
    limit = _char_limit(budget_tokens)
    total = len(content)
    if total <= limit:
        return Truncated(text=content, truncated=False, shown_chars=total, total_chars=total)
    worst = _result_note(total, total, read_on)
    if len(worst) <= limit // 2:
        shown = limit - len(worst)
        note = _result_note(shown, total, read_on)
    else:
        shown = max(0, limit - len(_short_note(total, total)))
        note = _short_note(shown, total)
    text = (content[:shown] + note)[:limit]
    return Truncated(text=text, truncated=True, shown_chars=shown, total_chars=total)


@dataclass
class ResponseBudget:
    """One tool-result budget for all the tool calls of one response (seed 004).

    The results of a response all enter the next request together, so they share one
    budget (``result_budget`` of the tokens available) instead of each getting it whole:
    four parallel Reads must not put four budgets into the window. Calls run in order;
    each gets an even share of what is left (what a short result leaves unused goes to
    the calls after it), and never less than ``floor``.
    """

    total_tokens: int
    floor_tokens: int
    used_tokens: int = 0

    def share(self, calls_left: int) -> int:
        """Tokens the next call's result may use, with `calls_left` calls to go (it too)."""
        left = max(0, self.total_tokens - self.used_tokens)
        return max(min(self.floor_tokens, self.total_tokens), left // max(1, calls_left))

    def spend(self, text: str) -> None:
        self.used_tokens += estimate_tokens(text)


def _page_note(first: int, last: int, total: int, read_on: str) -> str:
    return f"\n{TRUNCATION_MARKER}: showing characters {first}-{last} of {total}. {read_on}]"


def page_text(
    content: str, offset: int, budget_tokens: int, read_on: Callable[[int], str]
) -> Truncated:
    """The part of `content` from character `offset` that fits the budget, note included.

    For answers a tool renders whole and pages through (Detail): the note names the
    characters shown and, through ``read_on(next_offset)``, the call that shows the
    next part; a page after the first says where it starts.
    """
    limit = _char_limit(budget_tokens)
    total = len(content)
    offset = max(0, min(offset, total))
    head = f"[Continuing at character {offset + 1} of {total}.]\n" if offset else ""
    rest = content[offset:]
    if len(head) + len(rest) <= limit:
        return Truncated(
            text=head + rest, truncated=False, shown_chars=len(rest), total_chars=total
        )
    worst = _page_note(total, total, total, read_on(total))
    room = max(0, limit - len(head) - len(worst))
    end = offset + room
    note = _page_note(offset + 1, end, total, read_on(end))
    text = (head + content[offset:end] + note)[:limit]
    return Truncated(text=text, truncated=True, shown_chars=room, total_chars=total)
