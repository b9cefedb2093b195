"""The enriched instruction (seed 004): what a job's first movement is told, and nothing more.

The worker does not send ``job.instruction`` alone: the model also needs to know when
"now" is, what the people on the job said lately, and which files it was given. It
gets exactly that, in this order:

1. the current date-time block;
2. the last few comments (``job_comments_in_prompt``, 5), each cut to
   ``job_comment_max_chars`` (500) with a visible marker;
3. the file lists of ``input/`` and ``output/``, each cut to ``job_files_in_prompt``
   (200) paths with a line saying how many more there are and to use Glob; nothing
   inside a ``.git`` folder is listed (a repository's objects would crowd out its files);
4. the job instruction.

Deliberately left out: older comments, earlier movements' messages, ``logs/`` and file
contents. They are unbounded, and the model can fetch what it needs with the workspace
tools (Read, Grep, Glob) inside a movement. A resumed job (after ASK) is rebuilt the same
way from the latest comments, so the user's answer is always in view.

Pure: no I/O, no settings import; the caller passes the comments, lists and limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

_NO_FILES = "(empty)"


@dataclass(frozen=True)
class CommentView:
    """One job comment as the prompt shows it; ``author`` is the author kind."""

    author: str  # "user", "agent" or "system"
    body: str
    created_at: datetime


def _aware(moment: datetime, what: str) -> datetime:
    # A naive datetime would be read in the server's local zone and show the wrong time.
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got {moment!r}")
    return moment


def _utc_offset(local: datetime) -> str:
    offset = local.utcoffset()
    assert offset is not None  # local came from astimezone(), so it is aware
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{mins:02d}"


def render_time_block(now: datetime, tz: ZoneInfo) -> str:
    """The current date and time in the display zone, weekday included.

    Models have no clock and a training cut-off; without this block "today", "by
    Friday" or "last week's report" in a task would be guessed.
    """
    local = _aware(now, "now").astimezone(tz)
    return (
        "## Current date and time\n"
        f"- Date: {local:%Y-%m-%d} ({local:%A})\n"
        f"- Time: {local:%H:%M} ({tz.key}, {_utc_offset(local)})"
    )


def _cut(body: str, max_chars: int) -> str:
    if len(body) <= max_chars:
        return body
    return f"{body[:max_chars]}… [cut: {len(body) - max_chars} more characters]"


def _comment_stamp(created_at: datetime, today: datetime, tz: ZoneInfo) -> str:
    local = _aware(created_at, "comment created_at").astimezone(tz)
    # HH:MM alone is ambiguous for a comment from another day, so those carry the date.
    if local.date() == today.date():
        return f"{local:%H:%M}"
    return f"{local:%Y-%m-%d %H:%M}"


def _conversation(
    comments: Sequence[CommentView],
    *,
    now: datetime,
    tz: ZoneInfo,
    max_comments: int,
    comment_max_chars: int,
) -> str:
    # Sorted (stably) so that a caller passing newest-first still gets the latest ones.
    ordered = sorted(comments, key=lambda c: _aware(c.created_at, "comment created_at"))
    recent = ordered[-max_comments:] if max_comments > 0 else []
    if not recent:
        return "## Conversation so far\n\n(no comments)"
    today = now.astimezone(tz)
    entries = [
        f"[{c.author} · {_comment_stamp(c.created_at, today, tz)}]\n"
        f"{_cut(c.body, comment_max_chars)}"
        for c in recent
    ]
    return "## Conversation so far\n\n" + "\n\n".join(entries)


def _in_folder(folder: str, path: str) -> str:
    # Shown relative to the workspace root, as the tools take them; a path that already
    # names its folder (as `Workspace.list_files` returns them) is not prefixed twice.
    path = path.lstrip("/")
    return path if path.startswith(f"{folder}/") else f"{folder}/{path}"


def _in_git(path: str) -> bool:
    return ".git" in path.split("/")


def _file_list(folder: str, paths: Sequence[str], max_files: int) -> str:
    # ~9 tokens a path: an uncapped list of a big tree (22,000 files) fills the window
    # before the movement has done anything, so the first `max_files` are shown
    shown = sorted(_in_folder(folder, p) for p in paths if not _in_git(_in_folder(folder, p)))
    lines = [f"{folder}/"]
    lines.extend(f"- {path}" for path in shown[: max(0, max_files)])
    if not shown:
        lines.append(_NO_FILES)
    elif (more := len(shown) - max(0, max_files)) > 0:
        lines.append(f"…{more} more: use Glob")
    return "\n".join(lines)


def _workspace(input_files: Sequence[str], output_files: Sequence[str], max_files: int) -> str:
    return (
        "## Workspace\n\n"
        "File contents are not included; use the workspace tools to open what you need.\n\n"
        f"{_file_list('input', input_files, max_files)}\n\n"
        f"{_file_list('output', output_files, max_files)}"
    )


def render_enriched_instruction(
    *,
    instruction: str,
    comments: Sequence[CommentView],
    input_files: Sequence[str],
    output_files: Sequence[str],
    now: datetime,
    tz: ZoneInfo,
    max_comments: int = 5,
    comment_max_chars: int = 500,
    max_files: int = 200,
) -> str:
    """Build the enriched instruction for a job (see the module docstring for the parts).

    ``comments`` may be the job's whole thread: only the last ``max_comments`` (by
    ``created_at``) are shown, oldest of them first. ``input_files`` and
    ``output_files`` are paths relative to the workspace root (``input/a.csv``) or to
    their folder (``a.csv``); they are listed, never read: at most ``max_files`` of each
    folder, and none inside a ``.git`` folder.
    """
    _aware(now, "now")
    sections = [
        render_time_block(now, tz),
        _conversation(
            comments,
            now=now,
            tz=tz,
            max_comments=max_comments,
            comment_max_chars=comment_max_chars,
        ),
        _workspace(input_files, output_files, max_files),
        f"## Task\n\n{instruction}",
    ]
    return "\n\n".join(sections)
