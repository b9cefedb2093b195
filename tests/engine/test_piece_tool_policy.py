"""A piece movement's `tool_policy`: parsed with the movement, compiled once, and a bad
rule reported with the line it is on."""

from __future__ import annotations

from pathlib import Path

from app.domain.tool_policy import Effect, ToolRule
from app.engine.pieces import load_catalog

KNOWN = {"Read", "Write", "TaskCreate", "transition"}
READ_ASKS = "      - {tool: Read, effect: ask}\n"


def piece_with_policy(policy: str) -> str:
    return (
        "name: guarded\n"
        "movements:\n"
        "  - name: work\n"
        "    instruction: Work.\n"
        "    allowed_tools: [Read, Write]\n"
        "    tool_policy:\n"
        f"{policy}"
    )


def test_a_movements_rules_are_read_and_compiled(tmp_path: Path) -> None:
    (tmp_path / "guarded.yaml").write_text(
        piece_with_policy(
            "      - {tool: Write, effect: ask, expires_in: 300, on_timeout: cancel}\n"
            "      - tool: Read\n"
            "        input: {path: 'secrets/*'}\n"
            "        effect: deny\n"
        ),
        encoding="utf-8",
    )

    movement = load_catalog([tmp_path], KNOWN).pieces["guarded"].movement("work")

    assert [rule.tool for rule in movement.tool_policy] == ["Write", "Read"]
    assert movement.policy_rules()[1] == ToolRule(
        tool="Read", effect=Effect.deny, input={"path": "secrets/*"}
    )
    assert movement.policy_rules() is movement.policy_rules()


def test_a_movement_rule_whose_glob_cannot_compile_is_reported_at_its_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "guarded.yaml").write_text(
        piece_with_policy(READ_ASKS + "      - {tool: 'Wr[', effect: ask}\n"),
        encoding="utf-8",
    )

    [problem] = load_catalog([tmp_path], KNOWN).problems

    assert problem.line == 8
    assert "tool_policy.1.tool" in problem.reason


def test_a_movement_rule_naming_no_tool_is_reported_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "guarded.yaml").write_text(
        piece_with_policy(READ_ASKS + "      - {tool: Raed, effect: deny}\n"),
        encoding="utf-8",
    )

    [problem] = load_catalog([tmp_path], KNOWN).problems

    assert (problem.line, problem.column) == (8, 10)  # its `tool` key
    assert "names no tool ('Raed')" in problem.reason


def test_a_movement_with_more_rules_than_a_layer_holds_is_reported(tmp_path: Path) -> None:
    (tmp_path / "guarded.yaml").write_text(piece_with_policy(READ_ASKS * 3), encoding="utf-8")

    [problem] = load_catalog([tmp_path], KNOWN, 2).problems

    assert problem.line == 6
    assert "at most 2" in problem.reason
