"""Pieces (seed 004): the YAML model, the transition rules, the catalog and the lessons text."""

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
from app.worker.piece_runner import lessons_text


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
    assert {"chat", "default", "research"} <= set(catalog.pieces)


def test_the_default_piece_is_plan_work_review_with_feedback_back_to_work() -> None:
    default = load_catalog([BUILTIN_DIR]).pieces["default"]

    assert [m.name for m in default.movements] == ["plan", "work", "review"]
    assert default.first.name == "plan"
    assert default.movement("plan").transitions == ["work"]
    assert default.movement("work").transitions == ["review"]
    assert set(default.movement("review").transitions) == {COMPLETE, "work"}


def test_the_chat_piece_is_one_movement_that_ends_with_the_turn() -> None:
    chat = load_catalog([BUILTIN_DIR]).pieces["chat"]

    assert len(chat.movements) == 1
    assert chat.movements[0].ends_on == "end_turn"
    assert chat.movements[0].fresh_segment is False


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


def test_a_broken_piece_file_is_reported_with_its_path_and_reason(tmp_path: Path) -> None:
    broken = write_piece(
        tmp_path,
        "broken.yaml",
        "name: broken\nmovements:\n  - name: a\n    instruction: x\n    transitions: [zz]\n",
    )
    write_piece(tmp_path, "good.yaml", GOOD)

    catalog = load_catalog([tmp_path])

    assert set(catalog.pieces) == {"good"}
    [problem] = catalog.problems
    assert problem.path == str(broken)
    assert "unknown next step 'zz'" in problem.reason


def test_a_file_that_is_not_yaml_or_not_a_mapping_is_reported(tmp_path: Path) -> None:
    write_piece(tmp_path, "a_syntax.yaml", "name: [unclosed\n")
    write_piece(tmp_path, "b_list.yaml", "- just\n- a list\n")

    catalog = load_catalog([tmp_path])

    assert catalog.pieces == {}
    reasons = {Path(p.path).name: p.reason for p in catalog.problems}
    assert set(reasons) == {"a_syntax.yaml", "b_list.yaml"}
    assert "YAML" in reasons["a_syntax.yaml"] or "Error" in reasons["a_syntax.yaml"]
    assert "not a YAML mapping" in reasons["b_list.yaml"]


def test_a_later_folder_overrides_a_piece_of_the_same_name(tmp_path: Path) -> None:
    write_piece(tmp_path, "mine.yaml", GOOD.replace("name: good", "name: default"))

    catalog = load_catalog([BUILTIN_DIR, tmp_path])

    assert [m.name for m in catalog.pieces["default"].movements] == ["only"]
    assert "research" in catalog.pieces


def test_a_missing_pieces_folder_is_reported(tmp_path: Path) -> None:
    catalog = load_catalog([BUILTIN_DIR, tmp_path / "nope"])

    assert [(p.path, p.reason) for p in catalog.problems] == [
        (str(tmp_path / "nope"), "not a folder")
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
