"""The index (`.git/index`, versions 2 to 4): what is staged, with each file's stat data.

Its checksum is verified (or all zeros, `index.skipHash`); a split index (`link`) or
another extension git requires understanding is refused rather than half-read; an
entry whose path git would refuse is left out.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

from app.worker.gitdata.files import Folder, GitDataError, tracked_path
from app.worker.gitdata.packs import offset_varint

INDEX = (".git", "index")
_HEADER = struct.Struct(">4sII")
_STAT = struct.Struct(">10I")
_ENTRY_FIXED = 62
_EXTENDED = 0x4000
_ASSUME_VALID = 0x8000
_SKIP_WORKTREE = 0x4000
_INTENT_TO_ADD = 0x2000
_UNDERSTOOD = {b"sdir"}  # sparse directories: their entries are skipped like skip-worktree
GITLINK_MODE = 0o160000
DIRECTORY_MODE = 0o040000


@dataclass(frozen=True)
class IndexEntry:
    path: str
    mode: int
    sha: str
    size: int
    mtime_ns: int
    untouched: bool  # assume-unchanged or skip-worktree: git does not look at the file
    intent_to_add: bool


@dataclass
class Index:
    entries: dict[str, IndexEntry] = field(default_factory=dict)
    conflicts: set[str] = field(default_factory=set)
    mtime_ns: int = 0  # when the index was written: a file changed since is compared by content


def read_index(folder: Folder) -> Index:
    try:
        data = folder.read(INDEX)
    except FileNotFoundError:
        return Index()
    written = folder.lstat(INDEX)
    index = _parse(data)
    index.mtime_ns = written.st_mtime_ns if written else 0
    return index


def _parse(data: bytes) -> Index:
    if len(data) < _HEADER.size + 20:
        raise GitDataError("an index too short to be one")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise GitDataError(f"an index of unknown format (version {version})")
    body, checksum = data[:-20], data[-20:]
    if checksum != bytes(20) and hashlib.sha1(body).digest() != checksum:
        raise GitDataError("an index whose checksum does not match")
    index = Index()
    at, previous = _HEADER.size, b""
    for _ in range(count):
        at, previous, flags, entry = _entry(body, at, version, previous)
        stage = (flags >> 12) & 3
        path = tracked_path(previous)
        if path is None:
            continue
        if stage:
            index.conflicts.add(path)
            index.entries.pop(path, None)
        elif entry.mode != DIRECTORY_MODE:
            index.entries[path] = _named(entry, path)
    _check_extensions(body, at)
    return index


def _named(entry: IndexEntry, path: str) -> IndexEntry:
    return IndexEntry(
        path,
        entry.mode,
        entry.sha,
        entry.size,
        entry.mtime_ns,
        entry.untouched,
        entry.intent_to_add,
    )


def _entry(
    data: bytes, at: int, version: int, previous: bytes
) -> tuple[int, bytes, int, IndexEntry]:
    """(where the next entry starts, this entry's path, its flags, the entry)."""
    if at + _ENTRY_FIXED > len(data):
        raise GitDataError("a truncated index")
    stat = _STAT.unpack_from(data, at)
    sha = data[at + 40 : at + 60].hex()
    flags = int.from_bytes(data[at + 60 : at + 62], "big")
    name_at, extra = at + _ENTRY_FIXED, 0
    if flags & _EXTENDED and version >= 3:
        extra = int.from_bytes(data[name_at : name_at + 2], "big")
        name_at += 2
    if version == 4:
        strip, name_at = offset_varint(data, name_at)
        end = data.find(b"\0", name_at)
        if end < 0 or strip > len(previous):
            raise GitDataError("a malformed index path")
        path = previous[: len(previous) - strip] + data[name_at:end]
        following = end + 1
    else:
        end = data.find(b"\0", name_at)
        if end < 0:
            raise GitDataError("a malformed index path")
        path = data[name_at:end]
        following = at + ((name_at - at + len(path) + 8) & ~7)
    entry = IndexEntry(
        path="",
        mode=stat[6],
        sha=sha,
        size=stat[9],
        mtime_ns=stat[2] * 1_000_000_000 + stat[3],
        untouched=bool(flags & _ASSUME_VALID or extra & _SKIP_WORKTREE),
        intent_to_add=bool(extra & _INTENT_TO_ADD),
    )
    return following, path, flags, entry


def _check_extensions(body: bytes, at: int) -> None:
    while at + 8 <= len(body):
        signature = body[at : at + 4]
        size = int.from_bytes(body[at + 4 : at + 8], "big")
        if not (b"A" <= signature[:1] <= b"Z") and signature not in _UNDERSTOOD:
            shown = signature.decode("ascii", "replace")
            raise GitDataError(f"an index with the extension {shown!r}, which is not read here")
        at += 8 + size
