"""`.gitignore` and `.git/info/exclude`: which untracked paths `git status` leaves out.

Patterns follow gitignore(5): `#` comments, `!` re-includes, a trailing `/` matches only
folders, a pattern with a `/` before its end is anchored to its file's folder, `*`, `?`
and `[…]` stay within one path component and `**` spans folders. Matching runs as a
set-of-states automaton (work bounded by path length times pattern length), never as
a backtracking regex a hostile pattern could make explode. `core.excludesFile` is
configuration and not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.worker.gitdata.files import Folder, GitDataError, Parts

EXCLUDE = (".git", "info", "exclude")
IGNORE_FILE = ".gitignore"

# a token: ("lit", c), ("any", ""), ("class", spec), ("star", ""), ("dirs", ""), ("all", "")
Token = tuple[str, str]
_WIDE = {"star", "dirs", "all"}  # may match nothing


@dataclass(frozen=True)
class Rule:
    tokens: tuple[Token, ...]
    negated: bool
    folders_only: bool
    anchored: bool
    needs: int  # characters any match consumes at least


def parse_rules(text: str) -> list[Rule]:
    rules = []
    for line in text.splitlines():
        rule = _rule(line)
        if rule is not None:
            rules.append(rule)
    return rules


def _rule(line: str) -> Rule | None:
    line = _strip_trailing_spaces(line)
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    folders_only = line.endswith("/") and not line.endswith("\\/")
    line = line.rstrip("/") if folders_only else line
    anchored = "/" in line
    line = line.removeprefix("/")
    if not line:
        return None
    tokens = _tokens(line)
    needs = sum(1 for kind, _ in tokens if kind not in _WIDE)
    return Rule(tokens, negated, folders_only, anchored, needs)


def _strip_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped + " "
    return stripped


def _tokens(pattern: str) -> tuple[Token, ...]:
    tokens: list[Token] = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if pattern.startswith("**", at) and (at == 0 or pattern[at - 1] == "/"):
            end = at + 2
            if end == len(pattern):
                tokens.append(("all", ""))
                at = end
                continue
            if pattern[end] == "/":
                tokens.append(("dirs", ""))
                at = end + 1
                continue
        if char == "*":
            if not tokens or tokens[-1][0] != "star":
                tokens.append(("star", ""))
            at += 1
        elif char == "?":
            tokens.append(("any", ""))
            at += 1
        elif char == "[" and (found := _bracket(pattern, at)) is not None:
            spec, at = found
            tokens.append(("class", spec))
        elif char == "\\" and at + 1 < len(pattern):
            tokens.append(("lit", pattern[at + 1]))
            at += 2
        else:
            tokens.append(("lit", char))
            at += 1
    return tuple(tokens)


def _bracket(pattern: str, at: int) -> tuple[str, int] | None:
    """A `[…]` class as "!" or "=" then its members ("a-z" ranges kept), and where it ends."""
    end = at + 1
    negated = end < len(pattern) and pattern[end] in "!^"
    end += 1 if negated else 0
    members = []
    first = True
    while end < len(pattern) and (pattern[end] != "]" or first):
        if pattern[end] == "\\" and end + 1 < len(pattern):
            end += 1
        members.append(pattern[end])
        end += 1
        first = False
    if end >= len(pattern):
        return None
    return ("!" if negated else "=") + "".join(members), end + 1


def _in_class(spec: str, char: str) -> bool:
    members = spec[1:]
    found = False
    at = 0
    while at < len(members):
        if at + 2 < len(members) and members[at + 1] == "-":
            found = found or members[at] <= char <= members[at + 2]
            at += 3
        else:
            found = found or members[at] == char
            at += 1
    return found != (spec[0] == "!")


def matches(tokens: tuple[Token, ...], text: str, charge: Callable[[int], None]) -> bool:
    """Whether the whole of `text` matches, simulating every position of the pattern at
    once; each character's work (the states it steps) is `charge`d as it is done."""
    states = _closure(tokens, {0})
    for char in text:
        charge(len(states))
        following: set[int] = set()
        for state in states:
            if state < len(tokens):
                following |= _step(tokens[state], state, char)
        states = _closure(tokens, following)
        if not states:
            return False
    return len(tokens) in states


def _step(token: Token, state: int, char: str) -> set[int]:
    kind, value = token
    if kind == "lit":
        return {state + 1} if char == value else set()
    if kind in ("any", "class"):
        fits = char != "/" and (kind == "any" or _in_class(value, char))
        return {state + 1} if fits else set()
    if kind == "star":
        return {state} if char != "/" else set()
    if kind == "dirs":
        return {state, state + 1} if char == "/" else {state}
    return {state}  # "all"


def _closure(tokens: tuple[Token, ...], states: set[int]) -> set[int]:
    pending = list(states)
    reached = set(states)
    while pending:
        state = pending.pop()
        if state < len(tokens) and tokens[state][0] in _WIDE and state + 1 not in reached:
            reached.add(state + 1)
            pending.append(state + 1)
    return reached


class Ignores:
    """The rules that apply in a repository, loaded folder by folder as the walk enters."""

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self.levels: dict[tuple[str, ...], list[Rule]] = {}
        self.exclude = self._load(EXCLUDE)

    def enter(self, parts: Parts) -> None:
        self.levels[tuple(parts)] = self._load([*parts, IGNORE_FILE])

    def ignored(self, parts: Parts, is_folder: bool) -> bool:
        """The decision of the deepest file with a rule that matches, last rule first."""
        for depth in range(len(parts) - 1, -1, -1):
            base = tuple(parts[:depth])
            decided = self._decide(self.levels.get(base, []), parts[depth:], is_folder)
            if decided is not None:
                return decided
        return bool(self._decide(self.exclude, parts, is_folder))

    def _decide(self, rules: list[Rule], parts: Parts, is_folder: bool) -> bool | None:
        relative = "/".join(parts)
        for rule in reversed(rules):
            if rule.folders_only and not is_folder:
                continue
            text = relative if rule.anchored else parts[-1]
            charge = self.folder.budget.take_bytes  # matching is charged like reading
            if rule.needs <= len(text) and matches(rule.tokens, text, charge):
                return not rule.negated
        return None

    def _load(self, parts: Parts) -> list[Rule]:
        try:
            raw = self.folder.read(parts)
        except (FileNotFoundError, GitDataError):  # missing, or a link git would not follow
            return []
        return parse_rules(raw.decode("utf-8", "surrogateescape"))
