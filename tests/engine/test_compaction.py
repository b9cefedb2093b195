"""Compaction's pure part: the opening a new segment starts with."""

from __future__ import annotations

from app.domain.items import AssistantMessage, ItemPayload, SystemMessage, TextBlock, user_text
from app.domain.tasks import TaskCreateArgs, TaskStore, render_snapshot
from app.engine.compaction import carried_input, is_task_snapshot, opening_items


def test_the_snapshot_of_a_cut_list_says_how_many_of_its_tasks_it_shows() -> None:
    store = TaskStore()
    for n in range(1, 61):
        store.create(TaskCreateArgs(subject=f"task {n}", description="why " * 500))

    opening = opening_items("SUMMARY", render_snapshot(store, 2_000), None, "toolu_1")

    note = opening[1]
    assert isinstance(note, SystemMessage) and is_task_snapshot(note)
    assert "whole" not in note.text
    shown = sum(1 for line in note.text.splitlines() if line.startswith("["))
    assert 0 < shown < 60
    assert f"{shown} of 60 tasks shown" in note.text.splitlines()[-1]


def test_a_message_carried_over_once_is_carried_again_by_the_next_compaction() -> None:
    """A turn compacted twice before its first answer (a restart in between): the copy the
    first compaction carried is the turn's message, and follows the next opening too."""
    question = user_text("What changed?")
    segment = [*opening_items("SUMMARY", "[1] pending: parse", "listed", "toolu_1"), question]

    summarized, carried = carried_input(segment, user_text("What changed?"))

    assert carried == question
    assert summarized == segment[:-1]


def test_a_message_the_model_has_answered_is_not_carried() -> None:
    question = user_text("What changed?")
    segment: list[ItemPayload] = [question, AssistantMessage(content=[TextBlock(text="No.")])]

    assert carried_input(segment, question) == (segment, None)
