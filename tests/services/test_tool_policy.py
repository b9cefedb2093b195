"""Tool policy layers: the operator's file as a process reads it at its start, and the
four layers of a turn compiled into one policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.tool_policy import Effect, Layer, RuleBounds, ToolRule
from app.services.tool_policy import ToolPolicyFileError, effective_policy, load_operator_rules

BOUNDS = RuleBounds(offered=["Bash", "Read", "Write"], max_rules=3)


def policy_file(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def test_without_a_file_the_operator_has_no_rules() -> None:
    assert load_operator_rules(None, BOUNDS) == ()


def test_the_operators_file_gives_its_rules_compiled(tmp_path: Path) -> None:
    path = policy_file(tmp_path, [{"tool": "Bash", "input": {"command": "rm *"}, "effect": "deny"}])

    [rule] = load_operator_rules(path, BOUNDS)

    assert rule == ToolRule(tool="Bash", effect=Effect.deny, input={"command": "rm *"})


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ([{"tool": "Bash", "effect": "ask"}, {"tool": "Bash[", "effect": "ask"}], "rules[1].tool"),
        ([{"tool": "Bash", "effect": "nope"}], "rules[0].effect"),
        ([{"tool": "Bash", "effect": "ask"}, {"tool": "Bsah", "effect": "ask"}], "rules[1].tool"),
        ([{"tool": "Bash", "effect": "ask", "extra": 1}], "rules[0].extra"),
        ({"tool": "Bash", "effect": "ask"}, "rules:"),
        ([{"tool": "Bash", "effect": "ask"}] * 4, "rules: 4 rules"),
    ],
)
def test_a_bad_rule_in_the_operators_file_is_named(
    tmp_path: Path, content: Any, named: str
) -> None:
    path = policy_file(tmp_path, content)

    with pytest.raises(ToolPolicyFileError) as refused:
        load_operator_rules(path, BOUNDS)

    assert f"STRATA_TOOL_POLICY_FILE {path}: {named}" in str(refused.value)


def test_an_operators_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolPolicyFileError, match="not JSON"):
        load_operator_rules(policy_file(tmp_path, "[{tool: Bash}"), BOUNDS)


def test_an_operators_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolPolicyFileError, match="cannot be read"):
        load_operator_rules(tmp_path / "missing.json", BOUNDS)


def rule(tool: str, effect: str, **fields: str) -> ToolRule:
    return ToolRule(tool=tool, effect=Effect(effect), input=fields)


def test_a_movements_rule_decides_over_the_tenants_and_the_sessions() -> None:
    policy = effective_policy(
        operator=(),
        tenant=[rule("Bash", "ask")],
        session=[rule("Bash", "deny", command="curl *")],
        movement=[rule("Bash", "allow")],
        builtin=BOUNDS.offered,
    )

    assert policy.decide("Bash", {"command": "make"}).layer is Layer.movement
    assert policy.decide("Bash", {"command": "curl x"}).effect is Effect.deny


def test_the_operators_deny_is_final_in_every_lower_layer() -> None:
    policy = effective_policy(
        operator=[rule("Write", "deny")],
        tenant=[rule("*", "allow")],
        session=[rule("*", "allow")],
        movement=[rule("Write", "allow")],
        builtin=BOUNDS.offered,
    )

    decision = policy.decide("Write", {"path": "a"})

    assert (decision.effect, decision.layer) == (Effect.deny, Layer.operator)
