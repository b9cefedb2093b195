"""Opening a repository's files as data: never through a link, never past a budget.

Every path is opened one component at a time from the repository folder's descriptor
with `O_NOFOLLOW`, so a symbolic link anywhere along it (or swapped in while reading)
is refused instead of followed out of the workspace; only regular files are read, and
`O_NONBLOCK` keeps a FIFO from stalling the open. Whatever is read counts against the
excerpt's `Budget`, so a huge or hostile repository costs bounded work.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024

Parts = Sequence[str]


class GitDataError(Exception):
    """The repository holds something this reader does not take as git data."""


class OverBudget(Exception):
    """The excerpt read as much as its budget allows."""


@dataclass
class Budget:
    """How much one excerpt may cost: entries looked at (of HEAD's tree, the index and the
    folders), bytes read (and matched against ignore patterns), the largest file diffed."""

    max_files: int
    max_read_bytes: int
    diff_max_lines: int
    files: int = 0
    read_bytes: int = 0

    def take_file(self) -> None:
        self.files += 1
        if self.files > self.max_files:
            raise OverBudget(f"looked at {self.max_files} entries")

    def take_bytes(self, count: int) -> None:
        self.read_bytes += count
        if self.read_bytes > self.max_read_bytes:
            raise OverBudget(f"read {self.max_read_bytes} bytes")

    def room(self) -> int:
        return max(0, self.max_read_bytes - self.read_bytes)


def split(path: str) -> list[str]:
    """A relative POSIX path as its components ("." and empty ones dropped)."""
    return [part for part in path.split("/") if part not in ("", ".")]


class Folder:
    """A directory opened without following links; what lies under it is opened alike."""

    def __init__(self, fd: int, budget: Budget) -> None:
        self.fd = fd
        self.budget = budget

    @classmethod
    def open(cls, root: Path, parts: Parts, budget: Budget) -> Folder:
        """`root` (trusted: the workspace) and then `parts` below it, none a link."""
        fd = os.open(root, _DIR)
        try:
            return cls(_descend(fd, parts), budget)
        finally:
            os.close(fd)

    def close(self) -> None:
        os.close(self.fd)

    def directory(self, parts: Parts) -> int:
        """A new descriptor of the directory at `parts` (the caller closes it)."""
        return _descend(self.fd, parts)

    def lstat(self, parts: Parts) -> os.stat_result | None:
        """The entry at `parts` itself (a link is not followed), or None when it, or a
        real directory leading to it, is missing."""
        if not parts:
            return os.fstat(self.fd)
        try:
            fd = self.directory(parts[:-1])
        except OSError:  # missing, not a directory, or a link (ELOOP)
            return None
        try:
            return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(fd)

    def readlink(self, parts: Parts) -> bytes:
        fd = self.directory(parts[:-1])
        try:
            target = os.readlink(parts[-1], dir_fd=fd)
        finally:
            os.close(fd)
        data = os.fsencode(target)
        self.budget.take_bytes(len(data))
        return data

    def listing(self, parts: Parts) -> list[tuple[str, os.stat_result]]:
        """The entries of the directory at `parts` in name order, each with its own
        (unfollowed) stat; each entry counts as a file compared."""
        fd = self.directory(parts)
        try:
            found: list[tuple[str, os.stat_result]] = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    self.budget.take_file()
                    try:
                        found.append((entry.name, entry.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue
            return sorted(found, key=lambda item: item[0])
        finally:
            os.close(fd)

    def open_file(self, parts: Parts) -> int:
        """A descriptor of the regular file at `parts`: FileNotFoundError when nothing is
        there, GitDataError when something other than a plain file is."""
        if not parts:
            raise GitDataError("an empty path")
        try:
            fd = self.directory(parts[:-1])
            try:
                handle = os.open(parts[-1], _FILE, dir_fd=fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise
        except OSError as exc:  # a link (ELOOP), or a file where a folder should be
            raise GitDataError(f"{'/'.join(parts)} is not a plain file") from exc
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            os.close(handle)
            raise GitDataError(f"{'/'.join(parts)} is not a plain file")
        return handle

    def read(self, parts: Parts, limit: int | None = None) -> bytes:
        """The bytes of the regular file at `parts`, all of it or its first `limit`."""
        handle = self.open_file(parts)
        try:
            wanted = self.budget.room() + 1 if limit is None else min(limit, self.budget.room() + 1)
            chunks: list[bytes] = []
            got = 0
            while got < wanted and (chunk := os.read(handle, min(_CHUNK, wanted - got))):
                chunks.append(chunk)
                got += len(chunk)
            self.budget.take_bytes(got)
            return b"".join(chunks)
        finally:
            os.close(handle)

    def read_at(self, handle: int, offset: int, size: int) -> bytes:
        data = os.pread(handle, size, offset)
        self.budget.take_bytes(len(data))
        return data


def _descend(fd: int, parts: Parts) -> int:
    """A new descriptor of `parts` below the directory `fd`, each step refusing a link."""
    current = os.dup(fd)
    for part in parts:
        try:
            following = os.open(part, _DIR, dir_fd=current)
        finally:
            os.close(current)
        current = following
    return current


def tracked_path(raw: bytes) -> str | None:
    """A path named by the index or a tree, as the reader may use it, or None when git
    itself would refuse it: empty, absolute, `.`/`..`, or through a `.git` folder."""
    if not raw or raw.startswith(b"/") or raw.endswith(b"/") or b"\0" in raw:
        return None
    for part in raw.split(b"/"):
        if part in (b"", b".", b"..") or part.lower() == b".git":
            return None
    return os.fsdecode(raw)
