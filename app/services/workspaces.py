"""Job workspace files over the API: the same confinement as the agent's tools, and areas.

A client writes only into `input/` (except `input/subtasks/`, where the runner copies
finished subtasks' outputs) and reads only `input/` and `output/`; `logs/` is the
runner's. A path is taken literally, segment by segment: `.`, `..`, empty segments,
backslashes and percent-encoded segments (a `%2e%2e` the server would not decode) are
refused with 422 rather than normalised, so no path can cross from one area into
another, or mean two things.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
from pathlib import Path
from typing import Literal

from app.db.models import Job
from app.domain.errors import InvalidInput, NotFound
from app.engine.tools import ToolError
from app.services.piece_jobs import workspace_of
from app.settings import Settings

Area = Literal["input", "output"]
# the path, not the server, is at fault: a name too long, a file where a folder should be
_UNWRITABLE_PATH = frozenset({errno.ENAMETOOLONG, errno.ENOTDIR, errno.EEXIST, errno.EISDIR})
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
# the runner's copies of finished subtasks' outputs (`app.worker.workspace_notes`)
_SUBTASKS = "subtasks"


def _path_pattern() -> str:
    """A regular expression of exactly the paths `_check_segments` accepts, for the OpenAPI
    document: segments joined by `/`, none empty, `.` or `..`, no backslash or NUL, and no
    `%` followed by two hex digits.

    Written without look-around, so that every engine reads it alike (ECMA-262 in clients,
    Python in Schemathesis, Rust's `regex`). "No `%XX`" is a three-state automaton: a
    pending escape (`%`, then at most one hex digit, any number of `%` restarting it) ends
    with a character that is neither hex nor `%`, or with the segment."""
    hexdigit = "[0-9A-Fa-f]"
    char = r"[^/\\%\x00]"  # a segment's characters, `%` aside
    ends_escape = r"[^0-9A-Fa-f/\\%\x00]"  # a character that ends a pending escape
    pending = f"%(?:%|{hexdigit}%)*{hexdigit}?"
    rest = f"(?:{char}|{pending}{ends_escape})*(?:{pending})?"
    first = r"[^/\\%\x00.]"  # a segment's first character that is not a dot
    segment = rf"(?:\.{{3,}}|\.*(?:{first}{rest}|{pending}(?:{ends_escape}{rest})?))"
    return f"^{segment}(?:/{segment})*$"


# what a workspace path may be: the path parameter's pattern in the OpenAPI document
PATH_PATTERN = _path_pattern()


def _check_segments(area: Area, path: str) -> None:
    if path.startswith("/"):  # "input//etc/x" would otherwise land quietly in input/etc/x
        raise InvalidInput(
            f"path {path!r} is absolute; give a path relative to {area}/", field="path"
        )
    if "\\" in path:
        raise InvalidInput(f"path {path!r} contains a backslash", field="path")
    if "\x00" in path:
        raise InvalidInput(f"path {path!r} contains a NUL character", field="path")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidInput(
                f"path {path!r} has a {segment or 'empty'!r} segment; give a plain path "
                f"inside {area}/",
                field="path",
            )
        if _ENCODED.search(segment):
            raise InvalidInput(
                f"path {path!r} has a percent-encoded segment {segment!r}", field="path"
            )


def _resolve(settings: Settings, job: Job, area: Area, path: str, *, must_exist: bool) -> Path:
    return _resolve_in(settings, job.id, area, path, must_exist=must_exist)


def _resolve_in(
    settings: Settings, job_id: str, area: Area, path: str, *, must_exist: bool
) -> Path:
    _check_segments(area, path)
    workspace = workspace_of(settings, job_id)
    workspace.ensure_layout()
    try:
        target = workspace.resolve(f"{area}/{path}")
    except ToolError as exc:
        raise InvalidInput(str(exc), field="path") from exc
    if not target.is_relative_to(workspace.root / area):  # a link to another area
        raise InvalidInput(f"path {path!r} leads out of {area}/", field="path")
    if must_exist and not os.path.exists(target):  # False, not OSError, for a name too long
        raise NotFound(f"{area}/{path} does not exist", resource="file")
    return target


def check_input_path(path: str) -> None:
    """Refuse (422) a path a client may not write under `input/`, by its text alone."""
    _check_segments("input", path)
    if path.split("/", 1)[0] == _SUBTASKS:
        raise InvalidInput(_in_subtasks(path), field="path")


def _in_subtasks(path: str) -> str:
    return (
        f"input/{path} is in input/{_SUBTASKS}/, where the runner copies the outputs of "
        "finished subtasks; upload elsewhere in input/"
    )


def input_target(settings: Settings, job_id: str, path: str) -> Path:
    """Where a client's file `path` goes in the job's `input/` (422 for a path it may not
    write: see `check_input_path`, or one that leads elsewhere through a link)."""
    target = _resolve_in(settings, job_id, "input", path, must_exist=False)
    owned = workspace_of(settings, job_id).root / "input" / _SUBTASKS
    if target == owned or target.is_relative_to(owned):  # by its name or through a link
        raise InvalidInput(_in_subtasks(path), field="path")
    return target


def unwritable(exc: OSError) -> bool:
    """Whether the path, not the server, is at fault for a write that failed."""
    return exc.errno in _UNWRITABLE_PATH


async def put_input_file(settings: Settings, job: Job, path: str, data: bytes) -> str:
    target = input_target(settings, job.id, path)

    def write() -> None:
        if target.is_dir():
            raise IsADirectoryError(f"{path!r} is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    try:
        await asyncio.to_thread(write)
    except IsADirectoryError as exc:
        raise InvalidInput(f"{path!r} is a folder", field="path") from exc
    except OSError as exc:
        if exc.errno not in _UNWRITABLE_PATH:
            raise
        raise InvalidInput(f"input/{path} cannot be written: {exc.strerror}", field="path") from exc
    return f"input/{path}"


def list_files(settings: Settings, job: Job) -> tuple[list[str], list[str]]:
    workspace = workspace_of(settings, job.id)
    workspace.ensure_layout()

    def within(area: str) -> list[str]:
        return [path.removeprefix(f"{area}/") for path in workspace.list_files(area)]

    return within("input"), within("output")


def file_path(settings: Settings, job: Job, area: Area, path: str) -> Path:
    target = _resolve(settings, job, area, path, must_exist=True)
    if not target.is_file():
        raise NotFound(f"{area}/{path} is not a file", resource="file")
    return target
