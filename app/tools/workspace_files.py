"""Read, Write, Edit, Glob and Grep over a job's workspace.

Every path goes through `Workspace.resolve`, so nothing outside the workspace can be
read, written or listed. The workspace and the token budget come from the tool context:
`ctx.workspace` and `ctx.result_tokens` (the call's share of its response's budget;
called on its own, the budget's cap); a result that was cut says so and how to get the
rest.

Writes: anywhere in the workspace except `logs/`, which the runner keeps (lessons, its
own records) and the agent must not forge, with one exception: checklists,
`logs/checklists/<name>.json` (not `tasks.json`, the runner's copy of the task list),
which the next movement is shown. `input/` is writable too (the agent may prepare or fix
input for a later step), except `input/subtasks/`, the copies of subtasks' outputs.
No path may go through a `.git` folder: the git excerpt after a verify movement compares
the files with the repository's index and history, which the agent must not forge.

Read of an image (PNG, JPEG, GIF, WebP, told by its bytes) answers the image itself: it
is stored as a file of the tenant (`ToolContext.images`, the checks of `POST /files`)
and sent as an image block inside the tool_result, or named in a note when it cannot be.

File work runs in a worker thread so a large file does not block the event loop.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.domain.files import image_type
from app.engine.tools import Tool, ToolContext, ToolError, ToolOutput
from app.engine.truncation import estimate_tokens, result_budget, truncate_read
from app.engine.workspace import Workspace

_BINARY_SNIFF_BYTES = 8192
# enough of a file's start to tell each image type by its magic bytes
_IMAGE_SNIFF_BYTES = 16
_READ_CHUNK_CHARS = 1 << 20
# Read collects at most this many characters per budget token before truncating; far
# more than fits, so the cut (and its note) is truncate_read's, at the right place.
_COLLECT_CHARS_PER_TOKEN = 8
_GREP_MAX_MATCHES = 2000
_GREP_LINE_MAX_CHARS = 400


@dataclass(frozen=True)
class ResultBudget:
    """How a result's token budget is derived from the tokens still available."""

    ratio: float = 0.5
    max_tokens: int = 60_000
    min_tokens: int = 1_000

    def tokens(self, ctx: ToolContext) -> int:
        """The call's share of its response's budget when the agent loop gave one;
        otherwise (a tool called on its own) the budget's cap."""
        if ctx.result_tokens is not None:
            return ctx.result_tokens
        return result_budget(None, ratio=self.ratio, cap=self.max_tokens, floor=self.min_tokens)


def context_workspace(ctx: ToolContext) -> Workspace:
    if ctx.workspace is None:
        raise ToolError("workspace tools need a job workspace")
    return ctx.workspace


# ------------------------------------------------------------------ inputs


class ReadInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace, e.g. 'input/data.csv'.")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="How many lines to show.")
    char_offset: int = Field(
        default=0,
        ge=0,
        description="Characters of the first line to skip: reads on inside a long line.",
    )


class WriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace, e.g. 'output/report.md'.")
    content: str = Field(description="The file's complete new content.")


class EditInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace.")
    old_string: str = Field(description="Exact text to replace (unique unless replace_all).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class GlobInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Glob relative to the workspace, e.g. 'output/**/*.md'.")


class GrepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Python regular expression, e.g. 'def \\w+' or '(?i)error'.")
    path: str = Field(default=".", description="File or folder to search, relative.")
    glob: str | None = Field(
        default=None,
        description="Only files matching this glob: without '/' it matches file names "
        "('*.py'), with '/' paths relative to the workspace ('input/**/*.csv').",
    )


# ------------------------------------------------------------------ helpers


def _open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    # resolve() returned a real path; O_NOFOLLOW refuses a link swapped in since.
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except IsADirectoryError:
        raise ToolError(f"{path.name!r} is a directory; use Glob to list its files") from None


def _read_bytes(path: Path) -> bytes:
    with os.fdopen(_open_nofollow(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def _write_bytes(path: Path, data: bytes) -> None:
    with os.fdopen(_open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
        handle.write(data)


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _writable(workspace: Workspace, path: Path, shown: str) -> None:
    relative = workspace.relative(path)
    parts = PurePosixPath(relative).parts
    if ".git" in parts:
        raise ToolError(f"{shown!r} is inside a .git folder, which tools do not write")
    if parts[:2] == ("input", "subtasks"):
        raise ToolError(f"{shown!r} is a copy of a subtask's output, kept read-only")
    checklist = (
        len(parts) == 3
        and parts[:2] == ("logs", "checklists")
        and parts[2].endswith(".json")
        and parts[2] != "tasks.json"
    )
    if parts[:1] == ("logs",) and not checklist:
        raise ToolError(
            f"{shown!r} is in logs/, which the runner keeps; write to output/ instead "
            "(checklists go to logs/checklists/<name>.json)"
        )
    if path == workspace.root or path.is_dir():
        raise ToolError(f"{shown!r} is a directory; give a file path")


def _fit_lines(lines: list[str], budget: int, note: Callable[[int], str]) -> str:
    """All of `lines`, or as many as fit in the budget followed by `note(count)`."""
    full = "\n".join(lines)
    if not truncate_read(full, budget).truncated:
        return full

    def render(count: int) -> str:
        return "\n".join([*lines[:count], note(count)])

    fits, too_many = 0, len(lines)
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        if truncate_read(render(middle), budget).truncated:
            too_many = middle
        else:
            fits = middle
    return render(fits)


def _check_glob(pattern: str) -> None:
    if not pattern.strip():
        raise ToolError("the glob pattern is empty")
    pure = PurePosixPath(pattern)
    if pure.is_absolute() or pattern.startswith("~"):
        raise ToolError(f"pattern {pattern!r} is absolute; patterns are relative to the workspace")
    if ".." in pure.parts:
        raise ToolError(f"pattern {pattern!r} leaves the workspace ('..' is not allowed)")


def _glob_body(pattern: str) -> str:
    """Regex for a glob: `*` and `?` stay within a folder, `**/` spans folders,
    `[abc]`/`[!abc]` are classes and `{a,b}` alternatives."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/"):
            if pattern.startswith("**/", i):
                out.append("(?:[^/]*/)*")
                i += 3
                continue
            if i + 2 == n:
                out.append(".*")
                i += 2
                continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = re.sub(r"([\\^\[&~|])", r"\\\1", body[1:] if negate else body)
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end + 1
            continue
        elif c == "{" and (end := pattern.find("}", i)) != -1:
            choices = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob_body(choice) for choice in choices) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_glob_body(pattern.removeprefix("./")))


def _glob_start(workspace: Workspace, pattern: str) -> Path:
    """The deepest literal folder of the pattern, if it is a plain folder (no links)."""
    literal: list[str] = []
    for part in PurePosixPath(pattern).parts[:-1]:
        if any(ch in part for ch in "*?[{"):
            break
        literal.append(part)
    start = workspace.root.joinpath(*literal)
    if literal and start.is_dir() and os.path.realpath(start) == str(start):
        return start
    return workspace.root


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    with os.fdopen(_open_nofollow(path, os.O_RDONLY), "rb") as raw:
        if _is_binary(raw.read(_BINARY_SNIFF_BYTES)):
            return
        raw.seek(0)
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
        for number, line in enumerate(text, start=1):
            yield number, line.rstrip("\n").rstrip("\r")


# ------------------------------------------------------------------ Read


def _skip_lines(text: io.TextIOWrapper, args: ReadInput, shown: str) -> int:
    """Move to the start of line `args.offset`; returns the characters skipped."""
    line, in_line, skipped = 1, False, 0
    while line < args.offset:
        chunk = text.readline(_READ_CHUNK_CHARS)
        if not chunk:
            lines = line - 1 + in_line
            raise ToolError(f"{shown!r} has {lines} lines; offset {args.offset} is past the end")
        skipped += len(chunk)
        in_line = not chunk.endswith("\n")
        line += not in_line
    return skipped


def _skip_chars(text: io.TextIOWrapper, args: ReadInput, shown: str) -> int:
    """Move `args.char_offset` characters into the line; returns them."""
    left = args.char_offset
    while left:
        chunk = text.readline(min(left, _READ_CHUNK_CHARS))
        if not chunk or chunk.endswith("\n"):
            length = args.char_offset - left + len(chunk.rstrip("\n"))
            raise ToolError(
                f"line {args.offset} of {shown!r} has {length} characters; char_offset "
                f"{args.char_offset} is past its end"
            )
        left -= len(chunk)
    return args.char_offset


def _count_rest(text: io.TextIOWrapper) -> tuple[int, int, bool]:
    """Characters and line breaks left in the file, and whether it ends with one."""
    chars = breaks = 0
    last = ""
    while chunk := text.read(_READ_CHUNK_CHARS):
        chars += len(chunk)
        breaks += chunk.count("\n")
        last = chunk[-1]
    return chars, breaks, last == "\n"


def _read(workspace: Workspace, args: ReadInput, budget: int) -> str:
    path = workspace.resolve(args.path, must_exist=True)
    shown = args.path
    if path.is_dir():
        raise ToolError(f"{shown!r} is a directory; use Glob to list its files")
    max_chars = max(budget * _COLLECT_CHARS_PER_TOKEN, 65_536)
    with os.fdopen(_open_nofollow(path, os.O_RDONLY), "rb") as raw:
        if _is_binary(raw.read(_BINARY_SNIFF_BYTES)):
            size = os.fstat(raw.fileno()).st_size
            raise ToolError(f"{shown!r} looks like a binary file ({size} bytes); Read shows text")
        raw.seek(0)
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
        before = _skip_lines(text, args, shown) + _skip_chars(text, args, shown)
        parts: list[str] = []
        size, complete = 0, 0
        while (args.limit is None or complete < args.limit) and size < max_chars:
            chunk = text.readline(min(_READ_CHUNK_CHARS, max_chars - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
            complete += chunk.endswith("\n")
        rest, rest_breaks, ends_with_break = _count_rest(text)
    content = "".join(parts)
    if not content:
        if args.offset > 1:
            raise ToolError(f"{shown!r} has {args.offset - 1} lines; offset is past the end")
        return f"({shown} is empty)"
    # the file's true totals, however little of it was collected
    file_chars = before + size + rest
    ends = ends_with_break if rest else content.endswith("\n")
    file_lines = args.offset - 1 + content.count("\n") + rest_breaks + (0 if ends else 1)
    note = ""
    if rest:
        last = args.offset + complete - 1
        if content.endswith("\n"):
            note = (
                f"\n[Showing lines {args.offset}-{last} of {file_lines}; the file goes on. To "
                f"read on, use Read with offset={last + 1}.]"
            )
        else:
            line_start = content.rfind("\n") + 1
            column = len(content) - line_start + (args.char_offset if not complete else 0)
            note = (
                f"\n[Line {last + 1} goes on beyond what is shown; to read on, use Read with "
                f"offset={last + 1} and char_offset={column}.]"
            )
    cut = truncate_read(
        content,
        budget - estimate_tokens(note),
        offset_line=args.offset,
        char_offset=args.char_offset,
        file_lines=file_lines,
        file_chars=file_chars,
    )
    if cut.truncated:
        return cut.text
    return content + note


# ------------------------------------------------------------------ Write / Edit


def _write(workspace: Workspace, args: WriteInput) -> str:
    path = workspace.resolve(args.path)
    _writable(workspace, path, args.path)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create {args.path!r}: a parent is a file") from None
    data = args.content.encode("utf-8")
    _write_bytes(path, data)
    verb = "overwrote" if existed else "created"
    return f"{verb} {workspace.relative(path)} ({len(data)} bytes)"


def _edit(workspace: Workspace, args: EditInput) -> str:
    path = workspace.resolve(args.path, must_exist=True)
    _writable(workspace, path, args.path)
    if not args.old_string:
        raise ToolError("old_string is empty; use Write to create or overwrite a whole file")
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are the same; nothing would change")
    try:
        content = _read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{args.path!r} is not UTF-8 text; Edit changes text files") from None
    count = content.count(args.old_string)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {args.path!r}; Read the file and copy the text "
            "exactly, whitespace included"
        )
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {args.path!r}; include more surrounding "
            "text to make it unique, or set replace_all to change every occurrence"
        )
    _write_bytes(path, content.replace(args.old_string, args.new_string).encode("utf-8"))
    return f"replaced {count} occurrence{'s' if count > 1 else ''} in {workspace.relative(path)}"


# ------------------------------------------------------------------ Glob / Grep


def _glob(workspace: Workspace, args: GlobInput, budget: int) -> str:
    _check_glob(args.pattern)
    regex = glob_regex(args.pattern)
    start = _glob_start(workspace, args.pattern)
    found = sorted(
        relative
        for relative in map(workspace.relative, workspace.iter_files(start))
        if regex.fullmatch(relative)
    )
    if not found:
        return f"no files match {args.pattern!r}"
    return _fit_lines(
        found,
        budget,
        lambda count: (
            f"[Output truncated: {count} of {len(found)} files shown; narrow the "
            "pattern (e.g. a folder or an extension) to see the rest.]"
        ),
    )


def _grep(workspace: Workspace, args: GrepInput, budget: int) -> str:
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from None
    name_filter: re.Pattern[str] | None = None
    by_path = False
    if args.glob is not None:
        _check_glob(args.glob)
        name_filter = glob_regex(args.glob)
        by_path = "/" in args.glob.strip("/")
    base = workspace.resolve(args.path, must_exist=True)
    files = list(workspace.iter_files(base)) if base.is_dir() else [base]
    matches: list[str] = []
    cut_lines = 0
    for file in files:
        relative = workspace.relative(file)
        if name_filter is not None:
            if not name_filter.fullmatch(relative if by_path else file.name):
                continue
        for number, line in _text_lines(file):
            if regex.search(line):
                if len(line) > _GREP_LINE_MAX_CHARS:
                    cut_lines += 1
                    more = len(line) - _GREP_LINE_MAX_CHARS
                    line = (
                        f"{line[:_GREP_LINE_MAX_CHARS]} […line cut: {more} more characters; "
                        f"Read offset={number} char_offset={_GREP_LINE_MAX_CHARS}]"
                    )
                matches.append(f"{relative}:{number}:{line}")
                if len(matches) >= _GREP_MAX_MATCHES:
                    break
        if len(matches) >= _GREP_MAX_MATCHES:
            break
    if not matches:
        return f"no matches for {args.pattern!r} in {args.path!r}"
    stopped = len(matches) >= _GREP_MAX_MATCHES
    total = f"at least {len(matches)}" if stopped else str(len(matches))
    if cut_lines:
        matches.append(
            f"[{cut_lines} matching line{'s' if cut_lines > 1 else ''} longer than "
            f"{_GREP_LINE_MAX_CHARS} characters cut, each marked; Read them with char_offset.]"
        )
    if stopped:
        matches.append(f"[Search stopped after {_GREP_MAX_MATCHES} matching lines.]")
    return _fit_lines(
        matches,
        budget,
        lambda count: (
            f"[Output truncated: {count} of {total} matching lines shown; narrow "
            "it with path=, glob= or a more specific pattern.]"
        ),
    )


# ------------------------------------------------------------------ tools


def _named(args: BaseModel) -> str:
    return str(getattr(args, "path", None) or getattr(args, "pattern", ""))


_Work = Callable[[Workspace, Any, int], str]


def _tool(
    name: str, description: str, model: type[BaseModel], work: _Work, budget: ResultBudget
) -> Tool[Any]:
    async def invoke(ctx: ToolContext, args: BaseModel) -> str:
        workspace = context_workspace(ctx)
        try:
            return await asyncio.to_thread(work, workspace, args, budget.tokens(ctx))
        except FileNotFoundError:
            raise ToolError(f"no such file or directory: {_named(args)!r}") from None
        except PermissionError:
            raise ToolError(f"permission denied: {_named(args)!r}") from None
        except OSError as exc:
            if exc.errno == getattr(os, "ELOOP", None):
                raise ToolError("the path is a symbolic link loop or was replaced") from None
            raise

    return Tool(name, description, model, invoke, in_chat=False)


def _image_file(workspace: Workspace, args: ReadInput, max_bytes: int) -> bytes | str | None:
    """The bytes of the image file Read was asked for, a note when it is too large to
    send, or None when the path is no image file (Read then answers as for any file)."""
    try:
        path = workspace.resolve(args.path, must_exist=True)
        if path.is_dir():
            return None
        with os.fdopen(_open_nofollow(path, os.O_RDONLY), "rb") as raw:
            if image_type(raw.read(_IMAGE_SNIFF_BYTES)) is None:
                return None
            size = os.fstat(raw.fileno()).st_size
            if size > max_bytes:
                return (
                    f"[image {args.path} not sent: it has {size} bytes; an image sent takes "
                    f"at most {max_bytes}]"
                )
            raw.seek(0)
            return raw.read()
    except (OSError, ToolError):  # the text path says what is wrong with the path
        return None


def _read_tool(budget: ResultBudget) -> Tool[Any]:
    text = _tool(
        "Read",
        "Read a file of the job's workspace (paths relative to it: input/ holds the user's "
        "files, output/ your results). offset is the first line (1-based), limit the number "
        "of lines, char_offset the characters of the first line to skip (for long lines). "
        "Long files are cut to fit and the result says how to read on. An image (PNG, "
        "JPEG, GIF, WebP) is shown to you as the image.",
        ReadInput,
        _read,
        budget,
    )

    async def invoke(ctx: ToolContext, args: ReadInput) -> str | ToolOutput:
        if ctx.images is not None:
            workspace = context_workspace(ctx)
            found = await asyncio.to_thread(_image_file, workspace, args, ctx.images.max_bytes)
            if isinstance(found, str):
                return found
            if found is not None:
                stored = await ctx.images.store(found, PurePosixPath(args.path).name)
                if isinstance(stored, str):
                    return stored
                return ToolOutput(f"{args.path} (an image)", images=(stored,))
        return await text.invoke(ctx, args)

    return replace(text, invoke=invoke)


def file_tools(budget: ResultBudget | None = None) -> list[Tool[Any]]:
    budget = budget or ResultBudget()
    return [
        _read_tool(budget),
        _tool(
            "Write",
            "Create or overwrite a file in the workspace with the given content (parent "
            "folders are created). Put results in output/; logs/ is read-only.",
            WriteInput,
            lambda workspace, args, _budget: _write(workspace, args),
            budget,
        ),
        _tool(
            "Edit",
            "Replace old_string with new_string in a workspace file. old_string must match "
            "exactly and be unique in the file, unless replace_all is true.",
            EditInput,
            lambda workspace, args, _budget: _edit(workspace, args),
            budget,
        ),
        _tool(
            "Glob",
            "List workspace files matching a glob, relative to the workspace: '*' within a "
            "folder, '**/' across folders, e.g. 'input/*.csv' or '**/*.md'.",
            GlobInput,
            _glob,
            budget,
        ),
        _tool(
            "Grep",
            "Search workspace files for a regular expression; answers file:line:text. path "
            "limits the search to a file or folder, glob to matching files.",
            GrepInput,
            _grep,
            budget,
        ),
    ]
