"""Pieces (seed 004): the YAML model, the transition rules, the catalog and the lessons text.

A piece file is checked whole at load: the tests of `load_catalog` each break one rule
and look for it among the catalog's problems, named without a server path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.engine.pieces import (
    ABORT,
    ASK,
    BUILTIN_DIR,
    COMPLETE,
    WAIT_SUBTASKS,
    Piece,
    load_catalog,
)
from app.worker.piece_state import OpenMovement, PieceState, capped, lessons_text


def movement(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "instruction": f"Do {name}.", **fields}


def piece(*movements: dict[str, Any], **fields: Any) -> Piece:
    return Piece.model_validate({"name": "p", "movements": list(movements), **fields})


def two_steps(**fields: Any) -> Piece:
    return piece(
        movement("a", transitions=["b"], default_next="b"),
        movement("b", transitions=[COMPLETE, "a"]),
        **fields,
    )


# ------------------------------------------------------------------ validation


def test_a_transition_to_an_unknown_step_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown next step 'nowhere'"):
        piece(movement("a", transitions=["nowhere"]))


def test_an_unknown_default_next_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown next step 'later'"):
        piece(movement("a", transitions=[COMPLETE], default_next="later"))


def test_duplicate_movement_names_are_refused() -> None:
    with pytest.raises(ValidationError, match="movement names must be unique"):
        piece(movement("a"), movement("a"))


def test_an_initial_movement_that_is_not_a_movement_is_refused() -> None:
    with pytest.raises(ValidationError, match="initial_movement 'start' is not a movement"):
        piece(movement("a"), initial_movement="start")


def test_a_piece_without_movements_is_refused() -> None:
    with pytest.raises(ValidationError, match="movements"):
        Piece.model_validate({"name": "p", "movements": []})


def test_unknown_fields_are_refused_so_typos_do_not_pass_silently() -> None:
    with pytest.raises(ValidationError, match="alowed_tools"):
        piece(movement("a", alowed_tools=["Read"]))


def test_special_steps_are_valid_targets() -> None:
    loaded = piece(movement("a", transitions=[COMPLETE, ASK, ABORT, WAIT_SUBTASKS]))

    assert loaded.movements[0].transitions == [COMPLETE, ASK, ABORT, WAIT_SUBTASKS]


def test_the_first_movement_is_the_initial_one_else_the_first_listed() -> None:
    assert two_steps().first.name == "a"
    assert two_steps(initial_movement="b").first.name == "b"


# ------------------------------------------------------------------ next steps


def test_ask_and_abort_are_open_to_every_movement_by_default() -> None:
    loaded = two_steps()

    assert loaded.next_steps(loaded.movement("a")) == ["b", ASK, ABORT]
    assert loaded.next_steps(loaded.movement("b")) == [COMPLETE, "a", ASK, ABORT]


def test_allow_ask_false_closes_ask() -> None:
    loaded = two_steps(allow_ask=False)

    assert loaded.next_steps(loaded.movement("a")) == ["b", ABORT]


def test_allow_abort_false_closes_abort() -> None:
    loaded = two_steps(allow_abort=False)

    assert loaded.next_steps(loaded.movement("a")) == ["b", ASK]


def test_a_listed_ask_is_not_offered_twice() -> None:
    loaded = piece(movement("a", transitions=[ASK, COMPLETE]))

    assert loaded.next_steps(loaded.movements[0]) == [ASK, COMPLETE, ABORT]


def test_check_step_accepts_an_open_step() -> None:
    loaded = two_steps()

    loaded.check_step(loaded.movement("a"), "b")
    loaded.check_step(loaded.movement("a"), ASK)
    loaded.check_step(loaded.movement("a"), ABORT)


def test_check_step_names_the_step_the_movement_and_the_open_steps() -> None:
    loaded = two_steps()

    with pytest.raises(ValueError) as caught:
        loaded.check_step(loaded.movement("a"), COMPLETE)

    assert str(caught.value) == (
        "next_step 'COMPLETE' is not open from 'a'; choose one of ['b', 'ASK', 'ABORT']"
    )


def test_check_step_refuses_ask_when_the_piece_closes_it() -> None:
    loaded = two_steps(allow_ask=False)

    with pytest.raises(ValueError, match="'ASK' is not open from 'a'"):
        loaded.check_step(loaded.movement("a"), ASK)


def test_forced_step_is_default_next() -> None:
    loaded = two_steps()

    assert loaded.forced_step(loaded.movement("a")) == "b"


def test_forced_step_without_default_next_is_abort() -> None:
    loaded = two_steps()

    assert loaded.forced_step(loaded.movement("b")) == ABORT


# ------------------------------------------------------------------ builtin pieces


def test_the_builtin_pieces_load_without_problems() -> None:
    catalog = load_catalog([BUILTIN_DIR])

    assert catalog.problems == []
    assert set(catalog.pieces) == {"default", "research"}


def test_chat_is_a_job_kind_not_a_piece_file() -> None:
    """`chat` is a job kind, not a piece: no `chat.yaml` is listed that nothing reads."""
    assert not (BUILTIN_DIR / "chat.yaml").exists()
    assert load_catalog([BUILTIN_DIR]).get("chat") is None


def test_the_default_piece_is_plan_work_review_with_feedback_back_to_work() -> None:
    default = load_catalog([BUILTIN_DIR]).pieces["default"]

    assert [m.name for m in default.movements] == ["plan", "work", "review"]
    assert default.first.name == "plan"
    assert default.movement("plan").transitions == ["work"]
    assert default.movement("work").transitions == ["review"]
    assert set(default.movement("review").transitions) == {COMPLETE, "work"}


def test_the_default_review_is_a_verify_movement_forced_only_into_complete() -> None:
    review = load_catalog([BUILTIN_DIR]).pieces["default"].movement("review")

    assert review.verify is True
    assert review.default_next == COMPLETE  # and a forced COMPLETE fails the job


def test_the_research_piece_may_spawn_subtasks_and_wait_for_them() -> None:
    research = load_catalog([BUILTIN_DIR]).pieces["research"]

    investigate = research.first
    assert "spawn_subtask" in investigate.allowed_tools
    assert WAIT_SUBTASKS in research.next_steps(investigate)


# ------------------------------------------------------------------ the catalog


def write_piece(folder: Path, file: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """\
name: good
movements:
  - name: only
    instruction: Do it.
    transitions: [COMPLETE]
"""


def test_a_broken_piece_file_is_reported_by_file_name_and_reason(tmp_path: Path) -> None:
    write_piece(
        tmp_path,
        "broken.yaml",
        "name: broken\nmovements:\n  - name: a\n    instruction: x\n    transitions: [zz]\n",
    )
    write_piece(tmp_path, "good.yaml", GOOD)

    catalog = load_catalog([tmp_path])

    assert set(catalog.pieces) == {"good"}
    [problem] = catalog.problems
    assert (problem.file, problem.folder, problem.name) == ("broken.yaml", "pieces_dir", "broken")
    assert "unknown next step 'zz'" in problem.reason
    assert str(tmp_path) not in repr(problem)  # no server paths


def test_a_yaml_syntax_error_is_reported_with_its_line_and_column(tmp_path: Path) -> None:
    """A YAML syntax error is reported with where it is."""
    write_piece(tmp_path, "syntax.yaml", "name: s\nmovements:\n  - name: [unclosed\n")

    [problem] = load_catalog([tmp_path]).problems

    assert problem.file == "syntax.yaml"
    assert (problem.line, problem.column) == (4, 1)
    assert "YAML syntax error" in problem.reason


def test_a_file_that_is_not_a_mapping_is_reported(tmp_path: Path) -> None:
    write_piece(tmp_path, "b_list.yaml", "- just\n- a list\n")

    [problem] = load_catalog([tmp_path]).problems

    assert problem.file == "b_list.yaml"
    assert "not a YAML mapping" in problem.reason


def test_unknown_tool_names_are_refused_naming_the_movement(tmp_path: Path) -> None:
    """Typos in allowed_tools (`[Reed, Writ, Bash]`) are refused, never dropped silently."""
    write_piece(
        tmp_path,
        "typo.yaml",
        GOOD.replace("name: good", "name: typo").replace(
            "    transitions: [COMPLETE]",
            "    transitions: [COMPLETE]\n    allowed_tools: [Reed, Writ, Bash]",
        ),
    )

    catalog = load_catalog([tmp_path], known_tools={"Read", "Write", "Bash"})

    assert "typo" not in catalog.pieces
    [problem] = catalog.problems
    assert "unknown tools: only: Reed, only: Writ;" in problem.reason


@pytest.mark.parametrize("name", ["chat", "compaction", "summary", "piece", "compact", "summarize"])
def test_a_piece_named_like_an_internal_job_kind_is_refused(tmp_path: Path, name: str) -> None:
    """A piece named like an internal job kind (`compact`) would run that kind's handler."""
    write_piece(tmp_path, f"{name}.yaml", GOOD.replace("name: good", f"name: {name}"))

    catalog = load_catalog([tmp_path])

    assert name not in catalog.pieces
    [problem] = catalog.problems
    assert problem.name == name
    assert "internal job kind" in problem.reason


def test_a_movement_no_transition_reaches_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"no transition reaches from 'a': \['island'\]"):
        piece(movement("a", transitions=[COMPLETE]), movement("island", transitions=["a"]))


def test_a_movement_reached_only_by_a_forced_move_is_reachable() -> None:
    loaded = piece(movement("a", transitions=[COMPLETE], default_next="b"), movement("b"))

    assert loaded.unreachable() == []


def test_a_step_back_is_feedback_and_a_step_forward_is_not() -> None:
    loaded = two_steps()

    assert loaded.sends_back(loaded.movement("b"), "a") is True
    assert loaded.sends_back(loaded.movement("a"), "b") is False
    assert loaded.sends_back(loaded.movement("b"), COMPLETE) is False


def test_a_later_folder_overrides_a_piece_of_the_same_name(tmp_path: Path) -> None:
    write_piece(tmp_path, "mine.yaml", GOOD.replace("name: good", "name: default"))

    catalog = load_catalog([BUILTIN_DIR, tmp_path])

    assert [m.name for m in catalog.pieces["default"].movements] == ["only"]
    assert "research" in catalog.pieces


def test_a_missing_pieces_folder_is_reported(tmp_path: Path) -> None:
    catalog = load_catalog([BUILTIN_DIR, tmp_path / "nope"])

    assert [(p.file, p.folder, p.reason) for p in catalog.problems] == [
        ("", "pieces_dir", "the pieces folder is missing")
    ]
    assert "default" in catalog.pieces


# ------------------------------------------------------------------ lessons


def lesson(movement_name: str, text: str) -> dict[str, str]:
    return {"movement": movement_name, "text": text}


def test_lessons_are_listed_oldest_first_with_their_movement() -> None:
    text = lessons_text([lesson("plan", "inputs are CSV"), lesson("work", "use UTF-8")], 2000)

    assert text == "- (plan) inputs are CSV\n- (work) use UTF-8"


def test_lessons_over_the_limit_drop_the_oldest_first() -> None:
    lessons = [lesson("m", f"lesson {i:02d} " + "x" * 180) for i in range(20)]

    text = lessons_text(lessons, 2000)

    assert len(text) <= 2000
    assert text.endswith(lessons[-1]["text"])
    kept = [i for i in range(20) if f"lesson {i:02d} " in text]
    assert kept == list(range(20 - len(kept), 20))  # a suffix: the newest ones
    assert 0 < len(kept) < 20
    assert "lesson 00 " not in text


def test_lessons_exactly_at_the_limit_are_all_kept() -> None:
    lessons = [lesson("m", "a" * 10), lesson("m", "b" * 10)]
    full = lessons_text(lessons, 10_000)

    assert lessons_text(lessons, len(full) + 1) == full
    assert lessons_text(lessons, len(full) - 1) == "- (m) " + "b" * 10


def test_a_single_lesson_longer_than_the_limit_is_cut_to_the_limit() -> None:
    text = lessons_text([lesson("m", "z" * 5000)], 2000)

    assert 0 < len(text) <= 2000
    assert set(text) == {"z"}


# ------------------------------------------------------------------ feedback


def test_feedback_for_a_movement_is_capped_keeping_the_newest() -> None:
    state = PieceState()
    for i in range(40):
        state.send_back("work", "review", f"fix {i:02d} " + "f" * 100, limit=500)

    kept = state.feedback["work"]
    assert kept[-1]["text"].startswith("fix 39")
    assert len(lessons_text(kept, 10_000)) <= 500
    assert "fix 00" not in lessons_text(kept, 10_000)


def test_feedback_is_cleared_once_its_movement_ended() -> None:
    state = PieceState()
    state.send_back("work", "review", "add a title", limit=2000)

    state.delivered("work")

    assert "work" not in state.feedback


def test_a_single_entry_over_the_cap_is_cut_not_dropped() -> None:
    [entry] = capped([{"movement": "m", "text": "z" * 5000}], 100)

    assert 0 < len(entry["text"]) < 100


def test_state_written_before_feedback_named_its_source_still_loads() -> None:
    state = PieceState.load({"feedback": {"work": ["old style"]}, "visited": ["a", "b"]})

    assert state.feedback["work"] == [{"movement": "a later step", "text": "old style"}]
    assert state.movements_run == 2


def test_an_open_movement_keeps_the_context_thresholds_it_fired() -> None:
    state = PieceState(open=OpenMovement("work", 3, ["warn"]))

    again = PieceState.load(state.dump())

    assert again.open == OpenMovement("work", 3, ["warn"])


def test_an_open_movement_stored_before_thresholds_were_kept_has_none_fired() -> None:
    state = PieceState.load({"open": {"movement": "work", "segment": 3}})

    assert state.open == OpenMovement("work", 3, [])


AT_FAULT = """\
name: located
description: a piece with one mistake, on line 9 or 10
movements:
  - name: a
    instruction: Do A.
    transitions: [b]
  - name: b
    instruction: Do B.
    transitions: [COMPLETE]
"""


@pytest.mark.parametrize(
    ("change", "line", "column"),
    [
        pytest.param(("[COMPLETE]", "[COMPLETE, nowhere]"), 9, 29, id="unknown-next-step"),
        pytest.param(("[COMPLETE]", "[COMPLETE]\n    default_next: zz"), 10, 5, id="default-next"),
        pytest.param(("[COMPLETE]", "[COMPLETE]\n    tansitions: []"), 10, 5, id="unknown-field"),
        pytest.param(("[COMPLETE]", "[COMPLETE]\n    max_iterations: 0"), 10, 5, id="bad-value"),
        pytest.param(("    instruction: Do B.\n", ""), 7, 5, id="missing-field"),
        pytest.param(("- name: b", "- name: a"), 7, 5, id="duplicate-movement"),
        pytest.param(
            ("[COMPLETE]", "[COMPLETE]\n    allowed_tools: [Read, Reed]"), 10, 27, id="tool"
        ),
    ],
)
def test_a_piece_problem_points_at_the_line_at_fault(
    tmp_path: Path, change: tuple[str, str], line: int, column: int
) -> None:
    """A wrong field or rule is reported with its line, as a YAML syntax error is: a file
    may hold many movements."""
    write_piece(tmp_path, "located.yaml", AT_FAULT.replace(*change))

    [problem] = load_catalog([tmp_path], known_tools={"Read"}).problems

    assert (problem.line, problem.column) == (line, column), problem.reason


def test_two_files_of_one_folder_defining_one_piece_are_both_reported(tmp_path: Path) -> None:
    """Both files are reported and neither loads, not the one sorted last winning silently
    (a job would name the piece and run the other one)."""
    write_piece(tmp_path, "a_good.yaml", GOOD)
    write_piece(tmp_path, "b_copy.yaml", "# a copy\n" + GOOD.replace("Do it.", "Do it again."))

    catalog = load_catalog([BUILTIN_DIR, tmp_path])

    assert "good" not in catalog.pieces
    assert "default" in catalog.pieces  # the rest loads
    assert [(p.file, p.name, p.line) for p in catalog.problems] == [
        ("a_good.yaml", "good", 1),
        ("b_copy.yaml", "good", 2),
    ]
    for problem in catalog.problems:
        assert "'good' is defined by both a_good.yaml and b_copy.yaml" in problem.reason
