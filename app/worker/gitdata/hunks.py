"""Unified diff hunks of two texts, with bounded work whatever the texts are.

Lines are cut at LF only, as git cuts them. The common start and end are set aside in
linear time; the changed region between them is aligned line by line (difflib, without
its junk heuristic, as git does not have one) only when each side of it has at most
`align_max_lines` lines, since difflib's time grows with the square of that and worse
on repetitive text. A longer region is shown removed, then added: still a true diff,
only not the shortest. Hunk lines stop once they pass the characters the excerpt can
show; the counts of added and removed lines are exact either way.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

_CONTEXT = 3
_FUNCTION_BYTES = 80

Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class Hunks:
    lines: list[str]
    added: int
    removed: int


def split_lines(data: bytes) -> list[bytes]:
    """Lines as git cuts them: at each LF only (a CR stays part of its line)."""
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    return [*out, last] if last else out


def hunks(old: bytes, new: bytes, align_max_lines: int, max_chars: int) -> Hunks:
    before, after = split_lines(old), split_lines(new)
    codes = _opcodes(before, after, align_max_lines)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag != "equal")
    out: list[str] = []
    size = 0
    context = _Context(before)
    for group in _grouped(codes):
        for line in _hunk(group, before, after, context.above(group[0][1])):
            out.append(line)
            size += len(line) + 1
        if size > max_chars:
            break
    return Hunks(out, added, removed)


def _opcodes(before: list[bytes], after: list[bytes], align_max_lines: int) -> list[Opcode]:
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    limit = min(len(before), len(after)) - start
    while end < limit and before[-1 - end] == after[-1 - end]:
        end += 1
    a_end, b_end = len(before) - end, len(after) - end
    middle_a, middle_b = before[start:a_end], after[start:b_end]
    codes: list[Opcode] = [("equal", 0, start, 0, start)] if start else []
    if max(len(middle_a), len(middle_b)) <= align_max_lines:
        matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            codes.append((tag, start + i1, start + i2, start + j1, start + j2))
    elif middle_a or middle_b:
        codes.append(("replace", start, a_end, start, b_end))
    if end:
        codes.append(("equal", a_end, len(before), b_end, len(after)))
    return _merged(codes)


def _merged(codes: list[Opcode]) -> list[Opcode]:
    out: list[Opcode] = []
    for code in codes:
        if out and out[-1][0] == code[0] == "equal":
            out[-1] = ("equal", out[-1][1], code[2], out[-1][3], code[4])
        else:
            out.append(code)
    return out


def _grouped(codes: list[Opcode]) -> list[list[Opcode]]:
    """Changes with up to three lines of context, as difflib's get_grouped_opcodes."""
    if all(code[0] == "equal" for code in codes):
        return []
    codes = list(codes)
    if codes[0][0] == "equal":
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = ("equal", max(i1, i2 - _CONTEXT), i2, max(j1, j2 - _CONTEXT), j2)
    if codes[-1][0] == "equal":
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = ("equal", i1, min(i2, i1 + _CONTEXT), j1, min(j2, j1 + _CONTEXT))
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * _CONTEXT:
            group.append((tag, i1, i1 + _CONTEXT, j1, j1 + _CONTEXT))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - _CONTEXT), max(j1, j2 - _CONTEXT)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _hunk(group: list[Opcode], before: list[bytes], after: list[bytes], context: str) -> list[str]:
    first, last = group[0], group[-1]
    ranges = f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
    out = [f"{ranges} {context}" if context else ranges]
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            out += _marked(" ", before[i1:i2])
            continue
        out += _marked("-", before[i1:i2])
        out += _marked("+", after[j1:j2])
    return out


class _Context:
    """git's default hunk context: the last line above a hunk that starts with a letter,
    `_` or `$` (a function or section header in most languages), cut to 80 bytes. Hunks
    come in order, so the lines are scanned once whatever their number."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.scanned = 0
        self.found = ""

    def above(self, start: int) -> str:
        for line in self.lines[self.scanned : start]:
            if line[:1].isalpha() or line[:1] in (b"_", b"$"):
                self.found = line[:_FUNCTION_BYTES].decode("utf-8", "ignore").rstrip()
        self.scanned = max(self.scanned, start)
        return self.found


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _marked(mark: str, lines: list[bytes]) -> list[str]:
    out = []
    for line in lines:
        text = line.decode("utf-8", "replace")
        if text.endswith("\n"):
            out.append(mark + text[:-1])
        else:
            out += [mark + text, "\\ No newline at end of file"]
    return out
