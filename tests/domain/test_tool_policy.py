"""Tool policies: globs, the last match within a layer, the lowest deciding layer, a final deny."""

from __future__ import annotations

import pytest

from app.domain.tool_policy import (
    Decision,
    Effect,
    GlobError,
    Layer,
    ToolRule,
    compile_glob,
    decide,
    default_effect,
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
    assert (compile_glob(glob).fullmatch(text) is not None) is matched


@pytest.mark.parametrize("glob", ["Bash[", "[!", "[z-a]"])
def test_a_glob_that_cannot_compile_is_refused(glob: str) -> None:
    with pytest.raises(GlobError):
        compile_glob(glob)


def test_an_input_glob_matches_only_a_string_field() -> None:
    git = rule("Bash", "allow", command="git *")

    assert git.matches("Bash", {"command": "git log"})
    assert not git.matches("Bash", {"command": ["git", "log"]})
    assert not git.matches("Bash", {})


def test_within_a_layer_the_last_match_wins() -> None:
    policy = {Layer.session: [rule("Bash", "ask"), rule("Bash", "allow", command="git status*")]}

    assert decide(policy, "Bash", {"command": "git status"}, Effect.allow) == Decision(
        Effect.allow, Layer.session, 1, policy[Layer.session][1]
    )
    assert decide(policy, "Bash", {"command": "rm -rf x"}, Effect.allow).effect is Effect.ask


def test_a_lower_layer_overrides_a_higher_ask() -> None:
    policy = {Layer.operator: [rule("Bash", "ask")], Layer.movement: [rule("Bash", "allow")]}

    decision = decide(policy, "Bash", {"command": "make"}, Effect.allow)

    assert (decision.effect, decision.layer) == (Effect.allow, Layer.movement)


def test_a_deny_from_a_higher_layer_is_final() -> None:
    policy = {
        Layer.tenant: [rule("Bash", "deny", command="curl *")],
        Layer.session: [rule("*", "allow")],
    }

    decision = decide(policy, "Bash", {"command": "curl evil.example"}, Effect.allow)

    assert (decision.effect, decision.layer, decision.index) == (Effect.deny, Layer.tenant, 0)


def test_with_no_matching_rule_the_tools_default_applies() -> None:
    decision = decide({Layer.session: [rule("Write", "deny")]}, "Read", {}, Effect.allow)

    assert decision == Decision(Effect.allow)
    assert decision.by_default


def test_builtin_tools_default_to_allow_and_others_to_ask() -> None:
    assert default_effect("Bash", BUILTIN) is Effect.allow
    assert default_effect("mcp__git__commit", BUILTIN) is Effect.ask


def test_a_rule_naming_no_offered_tool_is_found() -> None:
    rules = [rule("Bash", "ask"), rule("Bsah", "deny"), rule("mcp__*", "ask")]

    assert unoffered(rules, BUILTIN) == [1, 2]
