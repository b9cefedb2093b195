"""`git diff --stat --patch` of the files against the index.

A binary file (a NUL in its first 8000 bytes, git's own test) is named, not diffed; the
hunks of a text file come from `hunks`. Work stops as soon as the text is longer than
the excerpt can show.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass

from app.worker.gitdata.files import Budget, Folder, OverBudget, split
from app.worker.gitdata.hunks import hunks
from app.worker.gitdata.index import IndexEntry
from app.worker.gitdata.objects import ObjectStore
from app.worker.gitdata.status import SYMLINK_MODE, Change, blob_id, quoted

_BINARY_PROBE = 8000
_ABBREV = 7
_BAR = 40


@dataclass(frozen=True)
class FileDiff:
    path: str
    header: list[str]
    hunks: list[str]  # patch lines after the header
    added: int
    removed: int
    note: str | None  # "Bin 10 -> 12 bytes" and the like, instead of counts


@dataclass(frozen=True)
class Side:
    """One side of a file's diff: its mode, its bytes, its object id."""

    mode: int
    data: bytes
    sha: str


_NONE = "0" * _ABBREV


def file_diffs(
    folder: Folder, store: ObjectStore, change: Change, entry: IndexEntry, limit: int
) -> list[FileDiff]:
    """The diff of one file against its index entry (a type change is a deletion and an
    addition, as git shows it)."""
    old = None if change.unstaged == "A" else _staged_side(store, entry)
    new = _current(folder, entry, change.unstaged)
    budget = folder.budget
    if change.unstaged == "T":  # a FIFO or a socket has no content to show
        gone = [_diff(change.path, old, None, budget, limit)]
        return gone + ([_diff(change.path, None, new, budget, limit)] if new else [])
    return [_diff(change.path, old, new, budget, limit)]


def _staged_side(store: ObjectStore, entry: IndexEntry) -> Side:
    return Side(entry.mode, store.get(entry.sha, "blob")[1], entry.sha)


def _current(folder: Folder, entry: IndexEntry, unstaged: str) -> Side | None:
    """The file as it is now; None when it is gone or is neither a file nor a link."""
    if unstaged == "D":
        return None
    parts = split(entry.path)
    found = folder.lstat(parts)
    if found is None:
        return None
    if stat.S_ISLNK(found.st_mode):
        target = folder.readlink(parts)
        return Side(SYMLINK_MODE, target, blob_id(target))
    if not stat.S_ISREG(found.st_mode):
        return None
    mode = entry.mode if entry.mode & 0o170000 == 0o100000 else 0o100644
    data = folder.read(parts)
    return Side(mode, data, blob_id(data))


def _diff(path: str, old: Side | None, new: Side | None, budget: Budget, limit: int) -> FileDiff:
    name = quoted(path)
    header = [f"diff --git a/{name} b/{name}", *_mode_lines(old, new)]
    shown_old = f"a/{name}" if old else "/dev/null"
    shown_new = f"b/{name}" if new else "/dev/null"
    before = old.data if old else b""
    after = new.data if new else b""
    if _binary(before) or _binary(after):
        note = f"Bin {len(before)} -> {len(after)} bytes"
        lines = [f"Binary files {shown_old} and {shown_new} differ"]
        return FileDiff(path, header, lines, 0, 0, note)
    found = hunks(before, after, budget.diff_max_lines, limit)
    header += [f"--- {shown_old}", f"+++ {shown_new}"]
    return FileDiff(path, header, found.lines, found.added, found.removed, None)


def _mode_lines(old: Side | None, new: Side | None) -> list[str]:
    if old is None and new is not None:
        return [f"new file mode {new.mode:06o}", f"index {_NONE}..{new.sha[:_ABBREV]}"]
    if new is None and old is not None:
        return [f"deleted file mode {old.mode:06o}", f"index {old.sha[:_ABBREV]}..{_NONE}"]
    assert old is not None and new is not None
    ids = f"index {old.sha[:_ABBREV]}..{new.sha[:_ABBREV]}"
    if old.mode != new.mode:
        return [f"old mode {old.mode:06o}", f"new mode {new.mode:06o}", ids]
    return [f"{ids} {old.mode:06o}"]


def _binary(data: bytes) -> bool:
    return b"\0" in data[:_BINARY_PROBE]


def stat_lines(diffs: list[FileDiff], left: int) -> list[str]:
    files = _per_file(diffs)
    width = max((len(quoted(d.path)) for d in files), default=0)
    biggest = max((d.added + d.removed for d in files), default=0)
    digits = len(str(biggest))
    lines = []
    for d in files:
        if d.note is not None:
            lines.append(f" {quoted(d.path):<{width}} | {d.note}")
            continue
        bar = "+" * _bar(d.added, biggest) + "-" * _bar(d.removed, biggest)
        lines.append(f" {quoted(d.path):<{width}} | {d.added + d.removed:>{digits}} {bar}")
    lines.append(f" … and {left} more files" if left else _summary(files))
    return lines


def _per_file(diffs: list[FileDiff]) -> list[FileDiff]:
    """One entry per path: a type change's deletion and addition count as one file."""
    files: list[FileDiff] = []
    for d in diffs:
        last = files[-1] if files else None
        if last is not None and last.path == d.path and last.note is None and d.note is None:
            files[-1] = FileDiff(
                d.path, [], [], last.added + d.added, last.removed + d.removed, None
            )
        else:
            files.append(d)
    return files


def _bar(count: int, biggest: int) -> int:
    if biggest <= _BAR:
        return count
    return max(1, count * _BAR // biggest) if count else 0


def _summary(diffs: list[FileDiff]) -> str:
    added = sum(d.added for d in diffs)
    removed = sum(d.removed for d in diffs)
    files = f" {len(diffs)} file{'s' if len(diffs) != 1 else ''} changed"
    parts = [files]
    if added or not removed:
        parts.append(f"{added} insertion{'s' if added != 1 else ''}(+)")
    if removed or not added:
        parts.append(f"{removed} deletion{'s' if removed != 1 else ''}(-)")
    return ", ".join(parts)


def diff_text(
    folder: Folder, store: ObjectStore, changes: list[tuple[Change, IndexEntry]], limit: int
) -> str:
    """The stat then the patches, computing no more files than `limit` characters show."""
    diffs: list[FileDiff] = []
    stopped = None
    shown = done = 0
    try:
        for change, entry in changes:
            for d in file_diffs(folder, store, change, entry, limit):
                diffs.append(d)
                shown += sum(len(line) + 1 for line in (*d.header, *d.hunks))
            done += 1
            if shown > limit:
                break
    except OverBudget as exc:
        stopped = str(exc)
    lines = stat_lines(diffs, len(changes) - done) if diffs else []
    for d in diffs:
        lines += ["", *d.header, *d.hunks] if d is diffs[0] else [*d.header, *d.hunks]
    if stopped:
        lines.append(f"(stopped: {stopped})")
    return "\n".join(lines)
