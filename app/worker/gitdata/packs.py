"""Objects in pack files: the version 2 pack index, entry headers, inflating, deltas.

Sizes come from the (untrusted) headers, so each is charged to the budget before it is
inflated, and inflating stops at the size the header named: a small hostile pack cannot
make the reader hold more than the budget allows.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

from app.worker.gitdata.files import Folder, GitDataError

_IDX_MAGIC = b"\377tOc"
_FANOUT = 8
_NAMES = _FANOUT + 256 * 4
_HEADER_BYTES = 40
_READ = 64 * 1024
OFS_DELTA = 6
REF_DELTA = 7
KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


class PackIndex:
    """A `.idx` file (version 2): where each object of its pack starts."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != _IDX_MAGIC or _u32(data, 4) != 2:
            raise GitDataError("a pack index that is not version 2")
        self.data = data
        self.count = _u32(data, _FANOUT + 255 * 4)
        if len(data) < _NAMES + self.count * 28 + 40:
            raise GitDataError("a truncated pack index")

    def offset(self, sha: bytes) -> int | None:
        first = sha[0]
        low = _u32(self.data, _FANOUT + (first - 1) * 4) if first else 0
        high = min(_u32(self.data, _FANOUT + first * 4), self.count)
        while low < high:
            middle = (low + high) // 2
            name = self.data[_NAMES + middle * 20 : _NAMES + middle * 20 + 20]
            if name == sha:
                return self._offset_at(middle)
            if name < sha:
                low = middle + 1
            else:
                high = middle
        return None

    def _offset_at(self, position: int) -> int:
        offset = _u32(self.data, _NAMES + self.count * 24 + position * 4)
        if not offset & 0x80000000:
            return offset
        at = _NAMES + self.count * 28 + (offset & 0x7FFFFFFF) * 8
        if at + 8 > len(self.data):
            raise GitDataError("a pack index whose large offset is missing")
        return int.from_bytes(self.data[at : at + 8], "big")


@dataclass(frozen=True)
class Entry:
    kind: int
    size: int
    base: int | bytes | None  # a delta's base: its pack offset, or its object id
    data_at: int


class Pack:
    """One `.pack` file, read at offsets its index gives."""

    def __init__(self, folder: Folder, handle: int, index: PackIndex) -> None:
        self.folder = folder
        self.handle = handle
        self.index = index

    def close(self) -> None:
        os.close(self.handle)

    def entry(self, offset: int) -> Entry:
        head = self.folder.read_at(self.handle, offset, _HEADER_BYTES)
        if not head:
            raise GitDataError("a pack entry past the end of its pack")
        byte = head[0]
        kind, size, shift, at = (byte >> 4) & 7, byte & 15, 4, 1
        while byte & 0x80:
            byte = _byte(head, at)
            size |= (byte & 0x7F) << shift
            shift, at = shift + 7, at + 1
        if kind == OFS_DELTA:
            distance, at = offset_varint(head, at)
            if distance <= 0 or distance > offset:
                raise GitDataError("a delta whose base is not before it in its pack")
            return Entry(kind, size, offset - distance, offset + at)
        if kind == REF_DELTA:
            if len(head) < at + 20:
                raise GitDataError("a truncated pack entry")
            return Entry(kind, size, head[at : at + 20], offset + at + 20)
        if kind not in KINDS:
            raise GitDataError(f"a pack entry of unknown type {kind}")
        return Entry(kind, size, None, offset + at)

    def inflate(self, entry: Entry) -> bytes:
        """The entry's data, exactly the size its header names."""
        self.folder.budget.take_bytes(entry.size)
        stream = zlib.decompressobj()
        out = bytearray()
        at = entry.data_at
        while not stream.eof:
            raw = self.folder.read_at(self.handle, at, _READ)
            if not raw:
                raise GitDataError("a truncated pack entry")
            at += len(raw)
            out += stream.decompress(raw, entry.size + 1 - len(out))
            while stream.unconsumed_tail and not stream.eof and len(out) <= entry.size:
                out += stream.decompress(stream.unconsumed_tail, entry.size + 1 - len(out))
            if len(out) > entry.size:
                raise GitDataError("a pack entry larger than its header says")
        if len(out) != entry.size:
            raise GitDataError("a pack entry smaller than its header says")
        return bytes(out)


def _byte(data: bytes, at: int) -> int:
    if at >= len(data):
        raise GitDataError("a truncated pack entry header")
    return data[at]


def offset_varint(data: bytes, at: int) -> tuple[int, int]:
    """The offset encoding of OFS_DELTA (and of index v4 path prefixes)."""
    byte = _byte(data, at)
    value, at = byte & 0x7F, at + 1
    while byte & 0x80:
        byte = _byte(data, at)
        value = ((value + 1) << 7) | (byte & 0x7F)
        at += 1
    return value, at


def _size_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = _byte(data, at)
        value |= (byte & 0x7F) << shift
        shift, at = shift + 7, at + 1
        if not byte & 0x80:
            return value, at


def apply_delta(base: bytes, delta: bytes, folder: Folder) -> bytes:
    """`base` rebuilt by `delta`'s copy and insert instructions."""
    source, at = _size_varint(delta, 0)
    target, at = _size_varint(delta, at)
    if source != len(base):
        raise GitDataError("a delta for a base of another size")
    folder.budget.take_bytes(target)
    out = bytearray()
    while at < len(delta):
        op, at = delta[at], at + 1
        if op & 0x80:
            start, at = _copy_field(delta, at, op, 4, 0)
            count, at = _copy_field(delta, at, op, 3, 4)
            count = count or 0x10000
            if start + count > len(base):
                raise GitDataError("a delta that copies past its base")
            out += base[start : start + count]
        elif op:
            if at + op > len(delta):
                raise GitDataError("a truncated delta")
            out += delta[at : at + op]
            at += op
        else:
            raise GitDataError("a delta with a reserved instruction")
        if len(out) > target:
            raise GitDataError("a delta larger than it says")
    if len(out) != target:
        raise GitDataError("a delta smaller than it says")
    return bytes(out)


def _copy_field(delta: bytes, at: int, op: int, width: int, first_bit: int) -> tuple[int, int]:
    value = 0
    for index in range(width):
        if op & (1 << (first_bit + index)):
            value |= _byte(delta, at) << (8 * index)
            at += 1
    return value, at
