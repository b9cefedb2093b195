"""`git status --short` computed from the data: HEAD's tree, the index, the files.

Each file is compared as git compares it without configuration and attributes: its
bytes as they are (no clean filter, no end-of-line conversion), the executable bit
not looked at (as with `core.fileMode=false`, since uploads do not keep it), a file
whose size and modification time match its index entry taken as unchanged. No rename
detection. Untracked folders are shown as `dir/`, as `git status` shows them.
"""

from __future__ import annotations

import hashlib
import stat
from dataclasses import dataclass, field

from app.worker.gitdata.files import Folder, OverBudget, split
from app.worker.gitdata.ignore import Ignores
from app.worker.gitdata.index import GITLINK_MODE, Index, IndexEntry
from app.worker.gitdata.refs import GIT
from app.worker.gitdata.trees import Blob

SYMLINK_MODE = 0o120000


@dataclass(frozen=True)
class Change:
    path: str
    staged: str  # the index against HEAD: " ", "A", "M", "D", "T", "U"
    unstaged: str  # the files against the index: " ", "A", "M", "D", "T", "U"


@dataclass
class Status:
    changes: list[Change] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    stopped: str | None = None  # why comparing ended before the last file


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def kind_of(mode: int) -> int:
    return mode & 0o170000


def quoted(path: str) -> str:
    """A path as git shows one: in C quotes when it holds a control character, a quote,
    a backslash or bytes that are not UTF-8, so it cannot break a line of the excerpt."""
    if not any(_special(char) for char in path):
        return path
    return '"' + "".join(_escaped(char) if _special(char) else char for char in path) + '"'


def _special(char: str) -> bool:
    code = ord(char)
    return char in '"\\' or code < 0x20 or code == 0x7F or 0xDC80 <= code <= 0xDCFF


def _escaped(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    named = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\{code - 0xDC00 if code >= 0xDC80 else code:03o}"  # the undecodable byte


def compare(folder: Folder, head: dict[str, Blob], index: Index, status: Status) -> None:
    """Fill `status`; on OverBudget what was found so far stays, and `stopped` says why."""
    try:
        _tracked(folder, head, index, status)
        _untracked(folder, index, status)
    except OverBudget as exc:
        status.stopped = str(exc)


def _tracked(folder: Folder, head: dict[str, Blob], index: Index, status: Status) -> None:
    for path in sorted(set(head) | set(index.entries) | index.conflicts):
        folder.budget.take_file()
        if path in index.conflicts:
            status.changes.append(Change(path, "U", "U"))
            continue
        entry = index.entries.get(path)
        staged = _staged(head.get(path), entry)
        unstaged = " " if entry is None else _unstaged(folder, entry, index.mtime_ns)
        if entry is not None and entry.intent_to_add:
            staged, unstaged = " ", "A"
        if staged != " " or unstaged != " ":
            status.changes.append(Change(path, staged, unstaged))


def _staged(committed: Blob | None, entry: IndexEntry | None) -> str:
    if entry is None:
        return "D" if committed is not None else " "
    if committed is None:
        return "A"
    if kind_of(committed.mode) != kind_of(entry.mode):
        return "T"
    return " " if (committed.sha, committed.mode) == (entry.sha, entry.mode) else "M"


def _unstaged(folder: Folder, entry: IndexEntry, index_written_ns: int) -> str:
    if entry.untouched or entry.mode == GITLINK_MODE:
        return " "
    parts = split(entry.path)
    found = folder.lstat(parts)
    if found is None or stat.S_ISDIR(found.st_mode):
        return "D"
    if stat.S_ISLNK(found.st_mode) != (kind_of(entry.mode) == SYMLINK_MODE):
        return "T"
    if stat.S_ISLNK(found.st_mode):
        return " " if blob_id(folder.readlink(parts)) == entry.sha else "M"
    if not stat.S_ISREG(found.st_mode):
        return "T"
    if entry.size and found.st_size % 2**32 != entry.size:
        return "M"
    if found.st_mtime_ns == entry.mtime_ns and entry.mtime_ns < index_written_ns:
        return " "  # stat data match and the entry is not racily clean
    return " " if blob_id(folder.read(parts)) == entry.sha else "M"


def _untracked(folder: Folder, index: Index, status: Status) -> None:
    tracked = set(index.entries) | index.conflicts
    folders = {
        "/".join(split(path)[:depth]) for path in tracked for depth in range(1, path.count("/") + 1)
    }
    ignores = Ignores(folder)
    _walk(folder, [], tracked, folders, ignores, status.untracked)
    status.untracked.sort()


def _walk(
    folder: Folder,
    parts: list[str],
    tracked: set[str],
    folders: set[str],
    ignores: Ignores,
    found: list[str],
) -> None:
    ignores.enter(parts)
    for name, entry in folder.listing(parts):
        child = [*parts, name]
        path = "/".join(child)
        if name == GIT or path in tracked:
            continue
        if stat.S_ISDIR(entry.st_mode):
            if path in folders:
                _walk(folder, child, tracked, folders, ignores, found)
            elif not ignores.ignored(child, True) and _holds_untracked(folder, child, ignores):
                found.append(path + "/")
        elif stat.S_ISREG(entry.st_mode) or stat.S_ISLNK(entry.st_mode):
            if not ignores.ignored(child, False):
                found.append(path)


def _holds_untracked(folder: Folder, parts: list[str], ignores: Ignores) -> bool:
    """Whether an untracked folder holds a file git would list (or is a repository)."""
    listing = folder.listing(parts)
    if any(name == GIT for name, _ in listing):
        return True
    ignores.enter(parts)
    for name, entry in listing:
        child = [*parts, name]
        if stat.S_ISDIR(entry.st_mode):
            if not ignores.ignored(child, True) and _holds_untracked(folder, child, ignores):
                return True
        elif stat.S_ISREG(entry.st_mode) or stat.S_ISLNK(entry.st_mode):
            if not ignores.ignored(child, False):
                return True
    return False
