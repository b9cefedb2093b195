"""The tool policy benchmark: its quick run measures both turns and the decisions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.domain.tool_policy import Effect, rules_of
from app.services.tool_policy import effective_policy
from bench import tool_policy
from bench.common import Context


def test_every_rule_it_stores_allows_the_call_its_turn_makes() -> None:
    rules = tool_policy.allow_every_call(5)

    policy = effective_policy(
        operator=(),
        tenant=(),
        session=rules_of(rules),
        builtin=[tool_policy.TOOL],
    )

    assert len(rules) == 5
    assert all(rule["effect"] == "allow" for rule in rules)
    decision = policy.decide(tool_policy.TOOL, {})
    assert (decision.effect, decision.index) == (Effect.allow, 4)


@pytest.mark.sqlite_only  # no database of the suite's: the benchmark makes its own
def test_the_quick_run_compares_turns_with_and_without_rules(tmp_path: Path) -> None:
    section = asyncio.run(tool_policy.run(Context(runs=1, quick=True, workdir=tmp_path)))

    turn, *decisions = section.rows
    ratio = turn.data["ratio"]
    assert len(ratio["runs"]) == tool_policy.RUNS_FACTOR
    assert ratio["median"] > 0
    assert len(turn.data["with"]["runs"]) == len(turn.data["without"]["runs"])
    assert [row.label.split(" (")[0] for row in decisions] == [
        "decision, plausible layers",
        "decision, every layer full",
    ]
    assert all(row.data["decide Read (tool rule)"] > 0 for row in decisions)
