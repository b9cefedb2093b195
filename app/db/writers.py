"""Who writes to a SQLite file: whether this `Database` can be the only one.

A live stream needs no safety poll of the table when nothing but its own process can
commit to the database: its process's commits signal it. SQLite does not say who else
has the file open, so every `Database` on a SQLite file joins a register beside it (the
file `<database>-writers`) for its whole life, and asks it at each tick whether it was
alone since the last one.

The register is POSIX record locks (`fcntl`): each process that has a `Database` on the
file holds a shared lock on one byte for as long as it does. A process is alone when it
can turn its shared lock into an exclusive one (a failed attempt leaves the shared lock
as it was; a successful one is turned back at once). A process that joined, wrote and
left between two looks holds no lock at the second one, so joining also adds one to a
count kept in the file, under an exclusive lock of another byte; a look reads it under
a shared lock of that byte, which also covers the probe, so a join is either seen by the
probe or by the count. Record locks belong to a process, not to a file descriptor, so
the `Database`s of one process share one descriptor and count themselves: two of them
on one file are two writers.

A process that writes to the file without joining (the `sqlite3` shell, another
program) is not seen; nor is a file on a network file system whose locks do not work.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from dataclasses import dataclass

_MEMBER = 100  # the byte each member holds shared
_COUNT = 101  # the byte that guards the count at offset 0
_COUNT_FORMAT = "<Q"


@dataclass
class _File:
    fd: int
    members: int


_files: dict[str, _File] = {}
_guard = threading.Lock()


def _count(fd: int) -> int:
    raw = os.pread(fd, struct.calcsize(_COUNT_FORMAT), 0)
    if len(raw) < struct.calcsize(_COUNT_FORMAT):
        return 0
    (count,) = struct.unpack(_COUNT_FORMAT, raw)
    return int(count)


class WriterRegister:
    """This `Database`'s membership of the register of the SQLite file at `path`."""

    def __init__(self, path: str) -> None:
        self.path = os.path.realpath(path) + "-writers"
        self._was_alone = False
        self._seen_count = -1
        self._left = False
        with _guard:
            found = _files.get(self.path)
            if found is None:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                found = _files[self.path] = _File(fd, 0)
            found.members += 1
            fcntl.lockf(found.fd, fcntl.LOCK_EX, 1, _COUNT)
            try:
                count = _count(found.fd) + 1
                os.pwrite(found.fd, struct.pack(_COUNT_FORMAT, count), 0)
                fcntl.lockf(found.fd, fcntl.LOCK_SH, 1, _MEMBER)
            finally:
                fcntl.lockf(found.fd, fcntl.LOCK_UN, 1, _COUNT)
        self._file = found

    def alone_since_last_look(self) -> bool:
        """True only when this `Database` is the file's one writer now and was at the
        previous look, and nobody joined in between: then nothing else can have committed
        since the previous look. The first look is always False."""
        alone, count = self._look()
        quiet = alone and self._was_alone and count == self._seen_count
        self._was_alone, self._seen_count = alone, count
        return quiet

    def _look(self) -> tuple[bool, int]:
        with _guard:
            if self._left or self._file.members != 1:
                return False, -1
            fd = self._file.fd
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, _COUNT)
            try:
                count = _count(fd)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _MEMBER)
                except OSError:
                    return False, count
                fcntl.lockf(fd, fcntl.LOCK_SH, 1, _MEMBER)
                return True, count
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, _COUNT)

    def leave(self) -> None:
        with _guard:
            if self._left:
                return
            self._left = True
            self._file.members -= 1
            if self._file.members == 0:
                del _files[self.path]
                os.close(self._file.fd)  # a process's record locks go with its last descriptor
