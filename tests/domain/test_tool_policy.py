"""Tool policies: globs, the last match within a layer, the lowest deciding layer, a final deny."""

from __future__ import annotations

import fnmatch
import itertools

import pytest
from pydantic import ValidationError

from app.domain.tool_policy import (
    BUILTIN_DEFAULT,
    Decision,
    DefaultBy,
    Effect,
    GlobError,
    Layer,
    OnTimeout,
    Policy,
    ToolDefault,
    ToolPolicyRule,
    ToolRule,
    compile_glob,
    decide,
    mcp_default,
    rules_of,
    stored,
    unoffered,
)

BUILTIN = {"Bash", "Read", "Write"}


def rule(tool: str, effect: str, **fields: str) -> ToolRule:
    return ToolRule(tool=tool, effect=Effect(effect), input=fields)


@pytest.mark.parametrize(
    ("glob", "text", "matched"),
    [
        ("git status*", "git status --short", True),
        ("git status*", "sudo git status", False),
        ("Bas?", "Bash", True),
        ("bash", "Bash", False),
        ("mcp__git__*", "mcp__git__log", True),
        ("[!r]m *", "rm -rf /", False),
        ("[a-c]at", "bat", True),
        ("[]]x", "]x", True),
        ("a.b", "axb", False),
        ("*", "line one\nline two", True),
    ],
)
def test_a_glob_is_the_shells_and_matches_the_whole_string(
    glob: str, text: str, matched: bool
) -> None:
    assert compile_glob(glob).matches(text) is matched


@pytest.mark.parametrize("glob", ["Bash[", "[!", "[z-a]"])
def test_a_glob_that_cannot_compile_is_refused(glob: str) -> None:
    with pytest.raises(GlobError):
        compile_glob(glob)


def test_a_glob_matches_as_the_shells_fnmatch_does() -> None:
    """Every glob of up to five parts of `a b * ? [ab] [!a]` against every text of up to
    five `a` / `b`: the same answer as `fnmatch.fnmatchcase`."""
    parts = ["a", "b", "*", "?", "[ab]", "[!a]"]
    globs = ["".join(p) for n in range(1, 6) for p in itertools.product(parts, repeat=n)]
    texts = ["".join(p) for n in range(6) for p in itertools.product("ab", repeat=n)]
    wrong = [
        (glob, text)
        for glob in globs[::13]  # a sample of every shape, the suite stays quick
        for text in texts
        if compile_glob(glob).matches(text) is not fnmatch.fnmatchcase(text, glob)
    ]

    assert wrong == []


def test_a_glob_with_many_stars_decides_a_long_input_without_trying_every_split() -> None:
    """Each run between stars is found once, at its first place: `*a*a…*b` against a long
    run of `a` is refused in one pass, where trying every split would never end."""
    pattern = compile_glob("*a" * 12 + "*b")

    assert not pattern.matches("a" * 200)
    assert pattern.matches("a" * 200 + "b")


def test_an_input_glob_matches_only_a_string_field() -> None:
    git = rule("Bash", "allow", command="git *")

    assert git.matches("Bash", {"command": "git log"})
    assert not git.matches("Bash", {"command": ["git", "log"]})
    assert not git.matches("Bash", {})


def test_within_a_layer_the_last_match_wins() -> None:
    policy = {Layer.session: [rule("Bash", "ask"), rule("Bash", "allow", command="git status*")]}

    assert decide(policy, "Bash", {"command": "git status"}, BUILTIN_DEFAULT) == Decision(
        Effect.allow, Layer.session, 1, policy[Layer.session][1]
    )
    assert decide(policy, "Bash", {"command": "rm -rf x"}, BUILTIN_DEFAULT).effect is Effect.ask


def test_a_lower_layer_overrides_a_higher_ask() -> None:
    policy = {Layer.operator: [rule("Bash", "ask")], Layer.movement: [rule("Bash", "allow")]}

    decision = decide(policy, "Bash", {"command": "make"}, BUILTIN_DEFAULT)

    assert (decision.effect, decision.layer) == (Effect.allow, Layer.movement)


def test_a_deny_from_a_higher_layer_is_final() -> None:
    policy = {
        Layer.tenant: [rule("Bash", "deny", command="curl *")],
        Layer.session: [rule("*", "allow")],
    }

    decision = decide(policy, "Bash", {"command": "curl evil.example"}, BUILTIN_DEFAULT)

    assert (decision.effect, decision.layer, decision.index) == (Effect.deny, Layer.tenant, 0)


def test_with_no_matching_rule_the_tools_default_applies() -> None:
    decision = decide({Layer.session: [rule("Write", "deny")]}, "Read", {}, BUILTIN_DEFAULT)

    assert decision == Decision(Effect.allow, default=DefaultBy.builtin)
    assert decision.by_default


def test_builtin_tools_default_to_allow_and_others_to_ask() -> None:
    policy = Policy({}, BUILTIN)

    assert policy.default("Bash") == BUILTIN_DEFAULT
    assert policy.default("mcp__git__commit") == ToolDefault(Effect.ask, DefaultBy.not_offered)


def test_an_mcp_tool_is_allowed_by_default_only_read_only_of_a_trusted_server() -> None:
    assert mcp_default(trusted=True, read_only=True).effect is Effect.allow
    assert mcp_default(trusted=True, read_only=False) == ToolDefault(
        Effect.ask, DefaultBy.mcp_not_read_only
    )
    assert mcp_default(trusted=False, read_only=True) == ToolDefault(
        Effect.ask, DefaultBy.mcp_untrusted
    )


def test_a_policy_takes_each_offered_tools_own_default() -> None:
    policy = Policy(
        {}, BUILTIN, {"mcp__git__git_status": mcp_default(trusted=True, read_only=True)}
    )

    assert policy.decide("mcp__git__git_status", {}) == Decision(
        Effect.allow, default=DefaultBy.mcp_read_only
    )
    assert policy.decide("mcp__git__git_add", {}).effect is Effect.ask


def test_a_rule_naming_no_offered_tool_is_found() -> None:
    rules = [rule("Bash", "ask"), rule("Bsah", "deny"), rule("B*", "allow")]

    assert unoffered(rules, BUILTIN) == [1]


def test_a_rule_on_mcp_tools_is_never_taken_for_unoffered() -> None:
    """MCP servers' tools are offered when a session runs: a rule for them stands."""
    assert unoffered([rule("mcp__git__*", "ask")], BUILTIN) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"effect": "allow", "expires_in": 60}, "expires_in"),
        ({"effect": "ask", "on_timeout": "deny"}, "on_timeout"),
        ({"effect": "ask", "expires_in": 60, "on_timeout": "later"}, "on_timeout"),
        ({"effect": "ask", "expires_in": 0}, "expires_in"),
        ({"effect": "maybe"}, "effect"),
    ],
)
def test_a_rule_with_a_timeout_that_cannot_apply_names_the_field(
    fields: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ToolPolicyRule.model_validate({"tool": "Bash", **fields})

    assert [error["loc"] for error in caught.value.errors()] == [(field,)]


def test_a_compiled_rule_refuses_on_timeout_without_expires_in() -> None:
    with pytest.raises(ValueError, match="expires_in"):
        ToolRule(tool="Bash", effect=Effect.ask, on_timeout=OnTimeout.cancel)


def test_a_glob_that_cannot_compile_is_refused_at_its_field() -> None:
    with pytest.raises(ValidationError) as caught:
        ToolPolicyRule.model_validate(
            {"tool": "Bash", "input": {"command": "git [status"}, "effect": "ask"}
        )

    assert [error["loc"] for error in caught.value.errors()] == [("input", "command")]


def test_stored_rules_compile_back_to_the_rules_given() -> None:
    given = ToolPolicyRule.model_validate(
        {"tool": "Bash", "effect": "ask", "expires_in": 60, "on_timeout": "cancel"}
    )

    assert stored([given]) == [
        {"tool": "Bash", "effect": "ask", "expires_in": 60, "on_timeout": "cancel"}
    ]
    assert rules_of(stored([given])) == (given.compiled(),)


LAYERED = {
    Layer.operator: [rule("Bash", "deny", command="rm *")],
    Layer.tenant: [rule("*", "ask"), rule("Read", "allow")],
    Layer.session: [rule("Bash", "allow", command="git *"), rule("Write", "deny")],
    Layer.movement: [rule("Bash", "ask")],
}


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", {"command": "rm -rf x"}),
        ("Bash", {"command": "git log"}),
        ("Bash", {"command": "make"}),
        ("Read", {"path": "a"}),
        ("Write", {"path": "a"}),
        ("Grep", {}),
        ("mcp__git__log", {}),
    ],
)
def test_a_compiled_policy_decides_as_decide_does(tool: str, tool_input: dict[str, object]) -> None:
    policy = Policy(LAYERED, BUILTIN)
    default = policy.default(tool)

    assert policy.decide(tool, tool_input) == decide(LAYERED, tool, tool_input, default)
    assert policy.decide(tool, tool_input) == policy.decide(tool, tool_input)


def test_a_tools_level_decision_leaves_out_the_rules_on_its_input() -> None:
    policy = Policy(
        {Layer.tenant: [rule("Bash", "ask")], Layer.session: [rule("Bash", "allow", command="*")]},
        BUILTIN,
    )

    assert policy.tool_level("Bash") == Decision(
        Effect.ask, Layer.tenant, 0, policy.layers[Layer.tenant][0]
    )


def test_a_policy_lists_every_rule_naming_a_tool_in_layer_order() -> None:
    policy = Policy(LAYERED, BUILTIN)

    assert [(layer, index) for layer, index, _ in policy.mentions("Bash")] == [
        (Layer.operator, 0),
        (Layer.tenant, 0),
        (Layer.session, 0),
        (Layer.movement, 0),
    ]
