"""Compaction's pure part: the opening a new segment starts with."""

from __future__ import annotations

from app.domain.items import SystemMessage
from app.domain.tasks import TaskCreateArgs, TaskStore, render_snapshot
from app.engine.compaction import is_task_snapshot, opening_items


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
