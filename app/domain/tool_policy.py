"""Tool policies: which tool calls run at once, which wait for a person, which never run.

A policy is an ordered list of rules `{tool, input?, effect, reason?}` on each of four
layers, from the operator's (highest) to a piece movement's (lowest). A rule matches a call
when its `tool` glob matches the tool's name and each of its `input` globs matches the
string value of that field of the call's input (a field that is missing or not a string
never matches). Within a layer the last matching rule wins, so a list reads like a shell's
allow-list: general first, exceptions after. Across layers the lowest layer that has a
matching rule decides, except that a `deny` is final: no lower layer can allow what a
higher one denied. With no matching rule at all a tool's default applies: `allow` for the
builtin tools (they act inside the job's sandbox), `ask` for anything else that may change
the world.

Globs are the shell's: `*` any run of characters, `?` one character, `[abc]` / `[!abc]`
one character of (not of) a set, ranges such as `[a-z]` included; matching is
case-sensitive and whole-string. A rule is compiled once, so deciding a call is a few
regular-expression matches in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Effect(StrEnum):
    allow = "allow"
    ask = "ask"
    deny = "deny"


class Layer(StrEnum):
    """Highest first: the order in which `decide` reads the layers."""

    operator = "operator"
    tenant = "tenant"
    session = "session"
    movement = "movement"


LAYERS: tuple[Layer, ...] = tuple(Layer)


class GlobError(ValueError):
    """A glob that cannot be compiled (a `[` set never closed)."""


def compile_glob(glob: str) -> re.Pattern[str]:
    """The whole-string, case-sensitive pattern of a shell glob."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            start = i + 1
            negate = glob[start : start + 1] == "!"
            if negate:
                start += 1
            # a `]` first in the set is one of its members, as in the shell
            end = glob.find("]", start + 1 if glob[start : start + 1] == "]" else start)
            if end < 0:
                raise GlobError(f"the set opened at character {i + 1} is never closed")
            members = "".join("\\" + c if c in "\\^][" else c for c in glob[start:end])
            out.append(f"[{'^' if negate else ''}{members}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as error:  # a range backwards, such as `[z-a]`
        raise GlobError(str(error)) from None


@dataclass(frozen=True)
class ToolRule:
    tool: str
    effect: Effect
    input: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None
    _tool: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _input: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tool", compile_glob(self.tool))
        compiled = tuple((name, compile_glob(glob)) for name, glob in self.input.items())
        object.__setattr__(self, "_input", compiled)

    def names_tool(self, tool: str) -> bool:
        return self._tool.fullmatch(tool) is not None

    def matches(self, tool: str, tool_input: Mapping[str, object]) -> bool:
        if self._tool.fullmatch(tool) is None:
            return False
        for name, pattern in self._input:
            value = tool_input.get(name)
            if not isinstance(value, str) or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass(frozen=True)
class Decision:
    """What a call's policy is, and what decided it: a layer's rule (its index in that
    layer's list) or, when no rule matched, the tool's default."""

    effect: Effect
    layer: Layer | None = None
    index: int | None = None
    rule: ToolRule | None = None

    @property
    def by_default(self) -> bool:
        return self.rule is None


Policy = Mapping[Layer, Sequence[ToolRule]]


def default_effect(tool: str, builtin: Iterable[str]) -> Effect:
    return Effect.allow if tool in builtin else Effect.ask


def decide(
    policy: Policy, tool: str, tool_input: Mapping[str, object], default: Effect
) -> Decision:
    """The effect of calling `tool` with `tool_input` under `policy`."""
    decided: Decision | None = None
    for layer in LAYERS:
        rules = policy.get(layer, ())
        for index in range(len(rules) - 1, -1, -1):
            rule = rules[index]
            if rule.matches(tool, tool_input):
                decided = Decision(rule.effect, layer, index, rule)
                if rule.effect is Effect.deny:
                    return decided
                break
    return decided or Decision(default)


def unoffered(rules: Sequence[ToolRule], offered: Iterable[str]) -> list[int]:
    """The indexes of the rules whose `tool` glob names no tool of `offered`: such a rule
    would never match, which is a mistake worth refusing."""
    names = list(offered)
    return [i for i, rule in enumerate(rules) if not any(rule.names_tool(n) for n in names)]
