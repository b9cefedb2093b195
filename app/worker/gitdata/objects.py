"""A repository's objects: loose ones and packed ones, from its own `objects/` only.

`objects/info/alternates` and `http-alternates` are not followed (they could name any
folder of the host), nor is a `commondir`: an object found nowhere else is missing,
and the excerpt says so.
"""

from __future__ import annotations

import zlib

from app.worker.gitdata.files import Folder, GitDataError
from app.worker.gitdata.packs import (
    KINDS,
    OFS_DELTA,
    REF_DELTA,
    Entry,
    Pack,
    PackIndex,
    apply_delta,
)

OBJECTS = (".git", "objects")
_HEADER_PEEK = 64

GitObject = tuple[str, bytes]  # its type ("blob", "tree", …) and its content


class ObjectStore:
    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self._packs: list[Pack] | None = None
        self._cache: dict[str, GitObject] = {}

    def close(self) -> None:
        for pack in self._packs or []:
            pack.close()
        self._packs = []

    def get(self, sha: str, expect: str | None = None) -> GitObject:
        found = self._find(sha, set())
        if expect is not None and found[0] != expect:
            raise GitDataError(f"object {sha[:12]} is a {found[0]}, not a {expect}")
        return found

    def _find(self, sha: str, seen: set[str]) -> GitObject:
        if sha in self._cache:
            return self._cache[sha]
        if sha in seen:
            raise GitDataError(f"object {sha[:12]} is its own delta base")
        seen.add(sha)
        found = self._loose(sha)
        if found is None:
            found = self._packed(sha, seen)
        if found is None:
            raise GitDataError(f"object {sha[:12]} is not in the repository")
        self._cache[sha] = found
        return found

    def _loose(self, sha: str) -> GitObject | None:
        try:
            raw = self.folder.read([*OBJECTS, sha[:2], sha[2:]])
        except FileNotFoundError:
            return None
        return _loose_object(raw, self.folder)

    def _packed(self, sha: str, seen: set[str]) -> GitObject | None:
        binary = bytes.fromhex(sha)
        for pack in self._all_packs():
            offset = pack.index.offset(binary)
            if offset is not None:
                return self._at(pack, offset, seen)
        return None

    def _at(self, pack: Pack, offset: int, seen: set[str]) -> GitObject:
        """The object at `offset`, its delta chain applied from the base up."""
        deltas: list[bytes] = []
        entry: Entry = pack.entry(offset)
        while entry.kind in (OFS_DELTA, REF_DELTA):
            deltas.append(pack.inflate(entry))
            if isinstance(entry.base, int):
                entry = pack.entry(entry.base)
                continue
            assert isinstance(entry.base, bytes)
            kind, data = self._find(entry.base.hex(), seen)
            return kind, _rebuild(data, deltas, self.folder)
        return KINDS[entry.kind], _rebuild(pack.inflate(entry), deltas, self.folder)

    def _all_packs(self) -> list[Pack]:
        if self._packs is None:
            self._packs = []
            try:
                listing = self.folder.listing([*OBJECTS, "pack"])
            except OSError:
                listing = []
            names = {name for name, _ in listing}
            for name in sorted(names):
                if name.endswith(".idx") and name[:-4] + ".pack" in names:
                    self._packs.append(self._open_pack(name[:-4]))
        return self._packs

    def _open_pack(self, stem: str) -> Pack:
        index = PackIndex(self.folder.read([*OBJECTS, "pack", stem + ".idx"]))
        return Pack(self.folder, self.folder.open_file([*OBJECTS, "pack", stem + ".pack"]), index)


def _rebuild(base: bytes, deltas: list[bytes], folder: Folder) -> bytes:
    for delta in reversed(deltas):
        base = apply_delta(base, delta, folder)
    return base


def _loose_object(raw: bytes, folder: Folder) -> GitObject:
    try:
        peek = zlib.decompressobj().decompress(raw, _HEADER_PEEK)
    except zlib.error as exc:
        raise GitDataError(f"a loose object that does not inflate: {exc}") from exc
    end = peek.find(b"\0")
    if end < 0:
        raise GitDataError("a loose object without a header")
    kind, _, size_text = peek[:end].partition(b" ")
    if kind.decode("ascii", "replace") not in KINDS.values() or not size_text.isdigit():
        raise GitDataError("a loose object with a malformed header")
    size = int(size_text)
    folder.budget.take_bytes(size)
    stream = zlib.decompressobj()
    try:
        data = stream.decompress(raw, end + 1 + size + 1)
    except zlib.error as exc:
        raise GitDataError(f"a loose object that does not inflate: {exc}") from exc
    if len(data) != end + 1 + size:
        raise GitDataError("a loose object whose size is not the one its header says")
    return kind.decode("ascii"), data[end + 1 :]
