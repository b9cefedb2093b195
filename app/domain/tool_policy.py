"""Tool policies: which tool calls run at once, which wait for a person, which never run.

A policy is an ordered list of rules `{tool, input?, effect, reason?}` on each of four
layers, from the operator's (highest) to a piece movement's (lowest). A rule matches a call
when its `tool` glob matches the tool's name and each of its `input` globs matches the
string value of that field of the call's input (a field that is missing or not a string
never matches). Within a layer the last matching rule wins, so a list reads like a shell's
allow-list: general first, exceptions after. Across layers the lowest layer that has a
matching rule decides, except that a `deny` is final: no lower layer can allow what a
higher one denied. With no matching rule at all the tool's own default applies
(`ToolDefault`): `allow` for the builtin tools (they act inside the job's sandbox); for an
MCP server's tool `allow` only when its server is trusted and the tool declares
`readOnlyHint`, else `ask`; `ask` for anything else.

Globs are the shell's: `*` any run of characters, `?` one character, `[abc]` / `[!abc]`
one character of (not of) a set, ranges such as `[a-z]` included; matching is
case-sensitive and whole-string. A rule is compiled once, so deciding a call is a few
string scans in memory.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from app.domain.errors import InvalidInput


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


class OnTimeout(StrEnum):
    """What becomes of a call an `ask` rule held once its `expires_in` has passed."""

    deny = "deny"
    cancel = "cancel"


OFFERED_LATER = "mcp__"
"""A tool glob starting so names tools of MCP servers, which are offered per session when
it runs (`mcp__<server>__<tool>`): no check that something offers them now."""


class GlobError(ValueError):
    """A glob that cannot be compiled (a `[` set never closed)."""


@dataclass(frozen=True)
class _Run:
    """The part of a glob between two stars: fixed-length (each of its parts is one
    character), a plain string when it has no `?` and no set, else a pattern."""

    length: int
    literal: str | None
    pattern: re.Pattern[str] | None

    def at(self, text: str, pos: int) -> bool:
        if self.literal is not None:
            return text.startswith(self.literal, pos)
        assert self.pattern is not None
        return self.pattern.match(text, pos) is not None

    def find(self, text: str, start: int, end: int) -> int:
        """Where it first matches within `text[start:end]`, or -1."""
        if self.literal is not None:
            return text.find(self.literal, start, end)
        assert self.pattern is not None
        found = self.pattern.search(text, start, end)
        return -1 if found is None else found.start()


class Glob:
    """A compiled shell glob: whole-string, case-sensitive matching.

    The runs between the stars have fixed lengths, so a text matches when the first run
    is at its start, the last at its end, and each run between is found, in order, at its
    first place after the one before: at most one scan of the text per run, however many
    stars (a regular expression `.*a.*a…` would try every split of a long input)."""

    __slots__ = ("_runs", "text")

    def __init__(self, text: str, runs: Sequence[_Run]) -> None:
        self.text = text
        self._runs = tuple(runs)

    def matches(self, text: str) -> bool:
        runs = self._runs
        first = runs[0]
        if len(runs) == 1:
            return len(text) == first.length and first.at(text, 0)
        last = runs[-1]
        end = len(text) - last.length
        if end < first.length or not first.at(text, 0) or not last.at(text, end):
            return False
        pos = first.length
        for run in runs[1:-1]:
            found = run.find(text, pos, end)
            if found < 0:
                return False
            pos = found + run.length
        return True


def compile_glob(glob: str) -> Glob:
    """The matcher of a shell glob; GlobError when it cannot be one."""
    runs: list[list[str]] = [[]]  # each run's one-character parts, as regular expressions
    plain: list[bool] = [True]  # whether each run is a plain string
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            runs.append([])
            plain.append(True)
        elif char == "?":
            runs[-1].append(".")
            plain[-1] = False
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
            runs[-1].append(f"[{'^' if negate else ''}{members}]")
            plain[-1] = False
            i = end
        else:
            runs[-1].append(char)
        i += 1
    compiled = []
    for parts, is_plain in zip(runs, plain, strict=True):
        if is_plain:
            compiled.append(_Run(len(parts), "".join(parts), None))
            continue
        pattern = "".join(p if len(p) > 1 or p == "." else re.escape(p) for p in parts)
        try:
            compiled.append(_Run(len(parts), None, re.compile(pattern, re.DOTALL)))
        except re.error as error:  # a range backwards, such as `[z-a]`
            raise GlobError(f"a set of the glob is no set: {error}") from None
    return Glob(glob, compiled)


@dataclass(frozen=True)
class ToolRule:
    """One rule, compiled. `expires_in` (seconds) bounds how long a call an `ask` rule holds
    waits for a person, and `on_timeout` says what it becomes then (deny when unset)."""

    tool: str
    effect: Effect
    input: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None
    expires_in: int | None = None
    on_timeout: OnTimeout | None = None
    _tool: Glob = field(init=False, repr=False, compare=False)
    _input: tuple[tuple[str, Glob], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if problem := _timeout_problem(self.effect, self.expires_in, self.on_timeout):
            raise ValueError(problem)
        object.__setattr__(self, "_tool", compile_glob(self.tool))
        compiled = tuple((name, compile_glob(glob)) for name, glob in self.input.items())
        object.__setattr__(self, "_input", compiled)

    def names_tool(self, tool: str) -> bool:
        return self._tool.matches(tool)

    def matches(self, tool: str, tool_input: Mapping[str, object]) -> bool:
        return self._tool.matches(tool) and self.matches_input(tool_input)

    def matches_input(self, tool_input: Mapping[str, object]) -> bool:
        """Whether each `input` glob matches its field (the tool's name aside)."""
        for name, glob in self._input:
            value = tool_input.get(name)
            if not isinstance(value, str) or not glob.matches(value):
                return False
        return True


def _timeout_problem(
    effect: Effect, expires_in: int | None, on_timeout: OnTimeout | None
) -> str | None:
    if expires_in is not None and expires_in < 1:
        return "expires_in is a number of seconds, at least 1"
    if expires_in is not None and effect is not Effect.ask:
        return "expires_in bounds the wait of an `ask` rule; this rule does not ask"
    if on_timeout is not None and expires_in is None:
        return "on_timeout says what happens once expires_in has passed: give expires_in"
    return None


class DefaultBy(StrEnum):
    """Why a tool's default is what it is."""

    builtin = "builtin"  # one of the server's own tools: allow
    mcp_read_only = "mcp_read_only"  # a trusted server's tool declaring readOnlyHint: allow
    mcp_untrusted = "mcp_untrusted"  # a tool of a server that is not trusted: ask
    mcp_not_read_only = "mcp_not_read_only"  # a trusted server's tool not read-only: ask
    not_offered = "not_offered"  # no tool offered here has this name: ask


@dataclass(frozen=True)
class ToolDefault:
    """A tool's effect when no rule names its call, and why."""

    effect: Effect
    by: DefaultBy


BUILTIN_DEFAULT = ToolDefault(Effect.allow, DefaultBy.builtin)
NOT_OFFERED_DEFAULT = ToolDefault(Effect.ask, DefaultBy.not_offered)


def mcp_default(*, trusted: bool, read_only: bool) -> ToolDefault:
    """An MCP tool's default: only a trusted server's word that a tool only reads lets
    it run unasked (a server's annotations are its own claims)."""
    if not trusted:
        return ToolDefault(Effect.ask, DefaultBy.mcp_untrusted)
    if not read_only:
        return ToolDefault(Effect.ask, DefaultBy.mcp_not_read_only)
    return ToolDefault(Effect.allow, DefaultBy.mcp_read_only)


@dataclass(frozen=True)
class Decision:
    """What a call's policy is, and what decided it: a layer's rule (its index in that
    layer's list) or, when no rule matched, the tool's default (`default` says which)."""

    effect: Effect
    layer: Layer | None = None
    index: int | None = None
    rule: ToolRule | None = None
    default: DefaultBy | None = None

    @property
    def by_default(self) -> bool:
        return self.rule is None


Layers = Mapping[Layer, Sequence[ToolRule]]


def decide(
    policy: Layers, tool: str, tool_input: Mapping[str, object], default: ToolDefault
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
    return decided or Decision(default.effect, default=default.by)


Mention = tuple[Layer, int, ToolRule]


class Policy:
    """The rules of every layer that apply to one turn or movement, compiled once: what
    the runner asks per tool call, in memory. The rules naming a tool are picked out the
    first time that tool is called (a turn calls few tools, many times), so deciding a
    call reads only them, last first. `builtin` names the server's own tools; `defaults`
    holds the default of each other tool offered (MCP tools); any other tool asks."""

    def __init__(
        self,
        layers: Layers,
        builtin: Iterable[str],
        defaults: Mapping[str, ToolDefault] | None = None,
    ) -> None:
        self.layers: dict[Layer, tuple[ToolRule, ...]] = {
            layer: tuple(layers.get(layer, ())) for layer in LAYERS
        }
        self.builtin = frozenset(builtin)
        self.defaults = dict(defaults or {})
        # per tool name: each layer's rules naming it, last first; bounded by the names
        # called under this policy (one turn's or movement's)
        self._naming: dict[str, tuple[tuple[Layer, tuple[tuple[int, ToolRule], ...]], ...]] = {}

    def _rules_naming(
        self, tool: str
    ) -> tuple[tuple[Layer, tuple[tuple[int, ToolRule], ...]], ...]:
        found = self._naming.get(tool)
        if found is None:
            found = tuple(
                (layer, named)
                for layer, rules in self.layers.items()
                if (
                    named := tuple(
                        (index, rules[index])
                        for index in range(len(rules) - 1, -1, -1)
                        if rules[index].names_tool(tool)
                    )
                )
            )
            self._naming[tool] = found
        return found

    def decide(self, tool: str, tool_input: Mapping[str, object]) -> Decision:
        """What `decide` answers for this call, from the rules naming `tool` only."""
        decided: Decision | None = None
        for layer, named in self._rules_naming(tool):
            for index, rule in named:
                if rule.matches_input(tool_input):
                    decided = Decision(rule.effect, layer, index, rule)
                    if rule.effect is Effect.deny:
                        return decided
                    break
        if decided is not None:
            return decided
        default = self.default(tool)
        return Decision(default.effect, default=default.by)

    def default(self, tool: str) -> ToolDefault:
        """`tool`'s default: what a call of it gets when no rule matches."""
        if tool in self.builtin:
            return BUILTIN_DEFAULT
        return self.defaults.get(tool, NOT_OFFERED_DEFAULT)

    def tool_level(self, tool: str) -> Decision:
        """The decision for `tool` from its rules without `input` globs: what a call gets
        unless a rule on its input says otherwise."""
        plain = {
            layer: [rule if not rule.input else _NEVER for rule in rules]
            for layer, rules in self.layers.items()
        }
        return decide(plain, tool, {}, self.default(tool))

    def mentions(self, tool: str) -> list[Mention]:
        """Every rule whose `tool` glob names `tool`, highest layer first, in list order."""
        return [
            (layer, index, rule)
            for layer, named in self._rules_naming(tool)
            for index, rule in reversed(named)
        ]


# stands in for a rule with `input` globs where only the tool-level rules count: it keeps
# the indexes of the others and never matches (no tool's name is empty)
_NEVER = ToolRule(tool="", effect=Effect.allow)


def unoffered(rules: Sequence[ToolRule], offered: Iterable[str]) -> list[int]:
    """The indexes of the rules whose `tool` glob names no tool of `offered`: such a rule
    would never match, which is a mistake worth refusing. A glob starting `mcp__` names
    tools that are offered later (`OFFERED_LATER`) and is never one of them."""
    names = list(offered)
    return [
        i
        for i, rule in enumerate(rules)
        if not rule.tool.startswith(OFFERED_LATER) and not any(rule.names_tool(n) for n in names)
    ]


# --- the rules as clients and files write them -----------------------------------------

TOOL_GLOB_MAX_CHARS = 200
INPUT_GLOB_MAX_CHARS = 2000
INPUT_FIELDS_MAX = 20
FIELD_NAME_MAX_CHARS = 100
REASON_MAX_CHARS = 1000
EXPIRES_IN_MAX_SECONDS = 30 * 24 * 3600


def _compilable(glob: str) -> str:
    try:
        compile_glob(glob)
    except GlobError as error:
        raise ValueError(f"not a glob: {error}") from None
    return glob


ToolGlob = Annotated[
    str,
    Field(min_length=1, max_length=TOOL_GLOB_MAX_CHARS),
    AfterValidator(_compilable),
]
InputGlob = Annotated[str, Field(max_length=INPUT_GLOB_MAX_CHARS), AfterValidator(_compilable)]
FieldName = Annotated[str, Field(min_length=1, max_length=FIELD_NAME_MAX_CHARS)]


class ToolPolicyRule(BaseModel):
    """A rule as an API client, the operator's file or a piece's movement writes it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"tool": "Bash", "input": {"command": "git status*"}, "effect": "allow"},
                {"tool": "Write", "effect": "ask", "reason": "a person reads what is written"},
            ]
        },
    )

    tool: ToolGlob = Field(
        description="A shell glob on the tool's name (`*`, `?`, `[a-z]`, `[!x]`; whole "
        "name, case-sensitive). It must name a tool that is offered; a glob starting "
        "`mcp__` names MCP servers' tools (`mcp__<server>__<tool>`) and is not checked."
    )
    input: dict[FieldName, InputGlob] = Field(
        default_factory=dict,
        max_length=INPUT_FIELDS_MAX,
        description="Globs on fields of the call's input: the rule matches only when each "
        "names a string field whose whole value it matches.",
    )
    effect: Effect = Field(
        description="`allow` runs the call, `ask` waits for a person, `deny` refuses it."
    )
    reason: str | None = Field(
        default=None, max_length=REASON_MAX_CHARS, description="Shown with what it decides."
    )
    expires_in: int | None = Field(
        default=None,
        ge=1,
        le=EXPIRES_IN_MAX_SECONDS,
        strict=True,
        description="An `ask` rule only: seconds a call it holds waits for a person.",
    )
    on_timeout: OnTimeout | None = Field(
        default=None,
        description="With `expires_in`: what the call becomes then (default `deny`; "
        "`cancel` cancels the job).",
    )

    @field_validator("expires_in")
    @classmethod
    def _asks(cls, value: int | None, info: ValidationInfo) -> int | None:
        effect = info.data.get("effect")  # absent when it was not valid
        if value is not None and effect is not None:
            if problem := _timeout_problem(effect, value, None):
                raise ValueError(problem)
        return value

    @field_validator("on_timeout")
    @classmethod
    def _after_expiry(cls, value: OnTimeout | None, info: ValidationInfo) -> OnTimeout | None:
        if value is not None and "expires_in" in info.data and info.data["expires_in"] is None:
            raise ValueError(str(_timeout_problem(Effect.ask, None, value)))
        return value

    @classmethod
    def of(cls, rule: ToolRule) -> ToolPolicyRule:
        """A compiled rule as it was written."""
        return cls.model_construct(
            tool=rule.tool,
            input=dict(rule.input),
            effect=rule.effect,
            reason=rule.reason,
            expires_in=rule.expires_in,
            on_timeout=rule.on_timeout,
        )

    def compiled(self) -> ToolRule:
        return ToolRule(
            tool=self.tool,
            effect=self.effect,
            input=dict(self.input),
            reason=self.reason,
            expires_in=self.expires_in,
            on_timeout=self.on_timeout,
        )


def stored(rules: Sequence[ToolPolicyRule]) -> list[dict[str, Any]]:
    """The rules as they are kept (JSON): only the fields that were given."""
    return [rule.model_dump(mode="json", exclude_defaults=True) for rule in rules]


def rules_of(data: Sequence[Mapping[str, Any]] | None) -> tuple[ToolRule, ...]:
    """Stored rules (checked when they were written), compiled; without pydantic, as a
    turn's start reads them."""
    return tuple(
        ToolRule(
            tool=rule["tool"],
            effect=Effect(rule["effect"]),
            input=rule.get("input") or {},
            reason=rule.get("reason"),
            expires_in=rule.get("expires_in"),
            on_timeout=OnTimeout(rule["on_timeout"]) if rule.get("on_timeout") else None,
        )
        for rule in data or ()
    )


@dataclass(frozen=True)
class RuleBounds:
    """What a layer's rules are checked against: the tool names they may name, and how
    many rules a layer may hold (`STRATA_TOOL_POLICY_MAX_RULES`)."""

    offered: Collection[str]
    max_rules: int


def check_rules(
    rules: Sequence[ToolPolicyRule], bounds: RuleBounds, field: str
) -> list[dict[str, Any]]:
    """The rules as they are stored, or InvalidInput naming the field at fault
    (`tool_policy[2].tool`): too many rules, or a rule naming no offered tool."""
    if len(rules) > bounds.max_rules:
        raise InvalidInput(
            f"{field}: {len(rules)} rules; a layer holds at most {bounds.max_rules}",
            field=field,
        )
    missing = unoffered([rule.compiled() for rule in rules], bounds.offered)
    if missing:
        at = f"{field}[{missing[0]}].tool"
        raise InvalidInput(f"{at}: {_names_nothing(rules[missing[0]].tool, bounds)}", field=at)
    return stored(rules)


def _names_nothing(glob: str, bounds: RuleBounds) -> str:
    return (
        f"{glob!r} names no tool offered here ({', '.join(sorted(bounds.offered))}; "
        f"a glob starting {OFFERED_LATER!r} names MCP tools)"
    )
