"""The TaskStore (seed 001): operations, reads, replay and the text the model reads.

Pure: no database, no tools. The property test at the end checks the central promise
of the design: a store rebuilt by replaying the log equals the one built live.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from app.domain.reminder import reminder_text
from app.domain.tasks import (
    ACTIVE_STATUSES,
    Task,
    TaskCreateArgs,
    TaskError,
    TaskOp,
    TaskStore,
    TaskUpdateArgs,
    UnknownTask,
    render_snapshot,
    render_summary,
    render_task,
    render_task_list,
    replay,
)

STATUSES = ("pending", "inprogress", "completed", "deleted")


def create(subject: str, description: str = "") -> TaskOp:
    return TaskOp("TaskCreate", {"subject": subject, "description": description})


def update(taskid: int, **fields: Any) -> TaskOp:
    return TaskOp("TaskUpdate", {"taskid": taskid, **fields})


def store_of(*ops: TaskOp) -> TaskStore:
    store = TaskStore()
    for op in ops:
        store.apply(op)
    return store


def brief(store: TaskStore) -> list[tuple[int, str, str, str]]:
    return [(t.taskid, t.status, t.subject, t.description) for t in store.all()]


# --- TaskCreate -----------------------------------------------------------------


def test_create_appends_pending_tasks_numbered_from_one() -> None:
    store = TaskStore()

    tasks = [store.apply(create(s, f"{s} in detail")) for s in ("plan", "build", "ship")]

    assert [(t.taskid, t.status, t.subject) for t in tasks] == [
        (1, "pending", "plan"),
        (2, "pending", "build"),
        (3, "pending", "ship"),
    ]
    assert store.all() == tasks
    assert tasks[0].description == "plan in detail"


def test_create_description_defaults_to_empty() -> None:
    task = store_of(TaskOp("TaskCreate", {"subject": "x"})).get(1)

    assert task.description == ""


@pytest.mark.parametrize(
    "args",
    [
        {"subject": "x", "taskid": 7},  # the id is the store's to choose
        {"subject": "x", "status": "completed"},  # a new task is always pending
        {"subject": ""},
        {"description": "no subject"},
        {},
    ],
)
def test_create_refuses_anything_but_subject_and_description(args: dict[str, Any]) -> None:
    store = TaskStore()

    with pytest.raises(ValidationError):
        store.apply(TaskOp("TaskCreate", args))

    assert store.all() == []
    assert store.apply(create("next")).taskid == 1  # a refused create uses no id


def test_the_create_tool_schema_has_no_taskid() -> None:
    schema = TaskCreateArgs.model_json_schema()

    assert set(schema["properties"]) == {"subject", "description"}
    assert schema["additionalProperties"] is False


def test_timestamps_come_from_the_operation() -> None:
    at = datetime(2026, 5, 3, 12, 0, tzinfo=UTC)
    later = datetime(2026, 5, 3, 13, 0, tzinfo=UTC)
    store = TaskStore()

    store.apply(TaskOp("TaskCreate", {"subject": "x"}, at))
    task = store.apply(TaskOp("TaskUpdate", {"taskid": 1, "status": "inprogress"}, later))

    assert (task.created_at, task.updated_at) == (at, later)


# --- TaskUpdate -----------------------------------------------------------------


def test_update_changes_only_the_given_fields() -> None:
    store = store_of(create("write", "the docs"), create("test"))

    store.apply(update(1, status="inprogress"))
    store.apply(update(2, subject="test more", description="all of it"))

    assert brief(store) == [
        (1, "inprogress", "write", "the docs"),
        (2, "pending", "test more", "all of it"),
    ]


def test_update_needs_at_least_one_field() -> None:
    store = store_of(create("x"))

    with pytest.raises(ValidationError, match="at least one"):
        store.apply(update(1))

    assert brief(store) == [(1, "pending", "x", "")]


@pytest.mark.parametrize("status", STATUSES)
def test_update_accepts_each_of_the_four_statuses(status: str) -> None:
    store = store_of(create("x"))

    assert store.apply(update(1, status=status)).status == status


@pytest.mark.parametrize("status", ["done", "in_progress", "PENDING", "", None, 3])
def test_update_refuses_any_other_status(status: Any) -> None:
    store = store_of(create("x"))
    args: dict[str, Any] = {"taskid": 1, "status": status}
    if status is None:
        args["subject"] = "y"  # status=None means "not given"; the update is valid
        store.apply(TaskOp("TaskUpdate", args))
        assert store.get(1).status == "pending"
        return

    with pytest.raises(ValidationError):
        store.apply(TaskOp("TaskUpdate", args))

    assert store.get(1).status == "pending"


def test_update_of_an_unknown_taskid_raises_unknown_task() -> None:
    store = store_of(create("x"))

    with pytest.raises(UnknownTask, match="task 9 does not exist"):
        store.apply(update(9, status="completed"))
    with pytest.raises(UnknownTask):
        store.get(9)

    assert isinstance(UnknownTask("x"), TaskError)
    assert brief(store) == [(1, "pending", "x", "")]


@pytest.mark.parametrize("taskid", [0, -1, "one", None])
def test_update_refuses_an_invalid_taskid(taskid: Any) -> None:
    store = store_of(create("x"))

    with pytest.raises(ValidationError):
        store.apply(TaskOp("TaskUpdate", {"taskid": taskid, "status": "completed"}))


def test_update_cannot_change_the_taskid() -> None:
    store = store_of(create("x"), create("y"))

    with pytest.raises(ValidationError):
        store.apply(TaskOp("TaskUpdate", {"taskid": 1, "new_taskid": 2, "status": "completed"}))
    task = store.apply(update(2, subject="renamed"))

    assert task.taskid == 2
    assert [t.taskid for t in store.all()] == [1, 2]


def test_delete_is_a_status_and_the_task_stays() -> None:
    store = store_of(create("a"), create("b"), create("c"))

    store.apply(update(2, status="deleted"))

    assert brief(store) == [
        (1, "pending", "a", ""),
        (2, "deleted", "b", ""),
        (3, "pending", "c", ""),
    ]
    assert store.get(2).status == "deleted"
    assert store.apply(create("d")).taskid == 4  # ids are never reused
    assert store.apply(update(2, status="pending")).status == "pending"  # and it can come back


def test_an_unknown_operation_is_refused() -> None:
    with pytest.raises(TaskError, match="TaskList is not a task operation"):
        TaskStore().apply(TaskOp("TaskList", {}))


# --- reads ----------------------------------------------------------------------


def test_all_lists_every_status_and_active_only_pending_and_inprogress() -> None:
    store = store_of(*(create(s) for s in STATUSES))
    for taskid, status in enumerate(STATUSES, start=1):
        if status != "pending":
            store.apply(update(taskid, status=status))

    assert [(t.taskid, t.status) for t in store.all()] == list(enumerate(STATUSES, start=1))
    assert [(t.taskid, t.status) for t in store.active()] == [(1, "pending"), (2, "inprogress")]
    assert ACTIVE_STATUSES == {"pending", "inprogress"}


def test_get_returns_one_task() -> None:
    store = store_of(create("a", "first"), create("b", "second"))

    assert store.get(2) == Task(taskid=2, status="pending", subject="b", description="second")


def test_stores_are_equal_by_their_tasks() -> None:
    assert store_of(create("a")) == store_of(create("a"))
    assert store_of(create("a")) != store_of(create("b"))
    assert TaskStore() != []


# --- replay ---------------------------------------------------------------------


def test_replay_reproduces_ids_and_states_in_log_order() -> None:
    ops = [
        create("plan", "outline"),
        create("build"),
        update(1, status="inprogress"),
        update(1, status="completed"),
        create("ship"),
        update(2, status="deleted"),
    ]

    store = replay(ops)

    assert brief(store) == [
        (1, "completed", "plan", "outline"),
        (2, "deleted", "build", ""),
        (3, "pending", "ship", ""),
    ]
    assert store == store_of(*ops)


def test_replay_skips_unreadable_old_format_ops() -> None:
    ops = [
        TaskOp("TaskCreate", {"title": "old format"}),  # a field the schema no longer has
        create("a"),
        TaskOp("TaskUpdate", {"id": 1, "state": "done"}),  # old names
        TaskOp("TaskUpdate", {"taskid": "1", "status": "finished"}),  # old status value
        TaskOp("TodoWrite", {"todos": []}),  # an operation that no longer exists
        create("b"),
        update(3, status="inprogress"),
    ]

    store = replay(ops)

    assert brief(store) == [(2, "pending", "a", ""), (3, "inprogress", "b", "")]


def test_a_create_replay_skips_still_uses_up_its_id() -> None:
    """The create had its id when it was recorded (only successful calls are replayed):
    later tasks keep theirs, and an update of one still finds it."""
    ops = [
        create("a"),
        TaskOp("TaskCreate", {"title": "old format"}),  # taskid 2, live
        create("c"),
        update(3, status="completed"),
    ]

    store = replay(ops)

    assert brief(store) == [(1, "pending", "a", ""), (3, "completed", "c", "")]
    assert store.create(TaskCreateArgs(subject="d")).taskid == 4


def test_replay_skips_refused_ops() -> None:
    ops = [
        update(1, status="completed"),  # nothing to update yet
        create("a"),
        update(1),  # no field
        update(1, status="done"),
        update(5, subject="ghost"),
        create("b"),
    ]

    assert brief(replay(ops)) == [(1, "pending", "a", ""), (2, "pending", "b", "")]


def test_replay_of_nothing_is_an_empty_store() -> None:
    assert replay([]).all() == []


# --- text for the model ------------------------------------------------------------


def test_render_task_shows_id_status_subject_and_indented_description() -> None:
    store = store_of(create("write", "the docs"), create("bare"))

    assert render_task(store.get(1)) == "[1] pending: write\n    the docs"
    assert render_task(store.get(2)) == "[2] pending: bare"


def test_render_summary_counts_every_status_and_lists_subjects_without_descriptions() -> None:
    store = store_of(create("a", "AAA"), create("b", "BBB"), create("c"), create("d"))
    store.apply(update(2, status="inprogress"))
    store.apply(update(3, status="completed"))
    store.apply(update(4, status="deleted"))

    assert render_summary(store) == (
        "4 tasks: 1 pending, 1 inprogress, 1 completed, 1 deleted\n"
        "[1] pending: a\n"
        "[2] inprogress: b\n"
        "[3] completed: c\n"
        "[4] deleted: d"
    )


@given(st.text(min_size=1, max_size=40))
def test_a_subject_is_one_line_written_alike_in_every_form(subject: str) -> None:
    """The reminder, TaskGet, TaskCreate/TaskUpdate results (task and summary), TaskList and
    the snapshot write a subject the same way, on one line: no subject adds a line."""
    store = TaskStore()
    task = store.create(TaskCreateArgs(subject=subject))
    reminded = reminder_text([task]).splitlines()[2]
    assert reminded.startswith("- taskid 1 [pending] ")
    line = f"[1] pending: {reminded.removeprefix('- taskid 1 [pending] ')}"

    assert render_task(task).splitlines() == [line]
    assert render_summary(store).splitlines()[1:] == [line]
    assert render_snapshot(store).splitlines() == [line]
    assert render_task_list(store).splitlines()[:2] == [line, ""]
    assert len(render_task_list(store).splitlines()) == 3


def test_render_summary_of_an_empty_store() -> None:
    assert render_summary(TaskStore()) == "0 tasks: 0 pending, 0 inprogress, 0 completed, 0 deleted"


def test_render_snapshot_has_every_task_with_descriptions() -> None:
    store = store_of(create("a", "AAA"), create("b"))
    store.apply(update(1, status="completed"))
    store.apply(update(2, status="deleted"))

    assert render_snapshot(store) == "[1] completed: a\n    AAA\n[2] deleted: b"
    assert render_snapshot(TaskStore()) == "The task list is empty."


def test_a_snapshot_that_fits_its_budget_is_the_whole_list() -> None:
    store = store_of(create("a", "AAA"), create("b"))

    assert render_snapshot(store, 1_000) == render_snapshot(store)


def test_a_snapshot_over_its_budget_shows_active_tasks_first_and_says_what_it_leaves_out() -> None:
    ops = [create(f"task {n:03d}", "d" * 300) for n in range(1, 201)]
    store = store_of(*ops)
    for taskid in range(1, 101):
        store.apply(update(taskid, status="completed"))

    text = render_snapshot(store, 2_000)

    assert len(text) <= 2_000
    lines = text.splitlines()
    assert lines[0] == "[101] pending: task 101"  # the first active task, not taskid 1
    assert "completed" not in text  # 100 active tasks leave no room for ended ones
    shown = sum(1 for line in lines if line.startswith("["))
    assert lines[-1] == (
        f"{shown} of 200 tasks shown (active first; {100 - shown} active not shown); "
        "TaskGet shows a task in full."
    )
    assert all(len(line) < 100 for line in lines if line.startswith("    "))  # cut descriptions


def test_a_list_that_fits_once_its_descriptions_are_cut_says_they_are() -> None:
    store = store_of(*(create(f"task {n}", "d" * 1_000) for n in range(1, 4)))

    text = render_snapshot(store, 1_000)

    assert [line for line in text.splitlines() if line.startswith("[")] == [
        "[1] pending: task 1",
        "[2] pending: task 2",
        "[3] pending: task 3",
    ]
    assert text.splitlines()[-1] == "(descriptions cut to one line; TaskGet shows a task in full)"
    assert len(text) <= 1_000


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=200, max_value=5_000))
def test_a_snapshot_never_exceeds_its_budget(tasks: int, budget: int) -> None:
    store = store_of(*(create("s" * 400, "d" * 5_000) for _ in range(tasks)))

    assert len(render_snapshot(store, budget)) <= budget


# --- property: live == replay ------------------------------------------------------

TOOL_ARGS: dict[str, type[BaseModel]] = {"TaskCreate": TaskCreateArgs, "TaskUpdate": TaskUpdateArgs}

# Mostly valid values, with the invalid ones mixed in often enough to matter.
subjects = st.one_of(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=3), st.just(""))
statuses = st.sampled_from([*STATUSES, *STATUSES, "done", ""])
existing_ids = st.integers(min_value=1, max_value=4)
taskids = st.one_of(existing_ids, existing_ids, existing_ids, st.sampled_from([0, -1, 9, "2"]))

creates = st.builds(
    lambda subject, description, extra: TaskOp(
        "TaskCreate",
        {
            "subject": subject,
            **({"description": description} if description is not None else {}),
            **extra,
        },
    ),
    subjects,
    st.none() | st.text(max_size=8),
    st.sampled_from([{}, {}, {}, {"taskid": 1}, {"title": "old"}]),
)
updates = st.builds(
    lambda taskid, fields: TaskOp("TaskUpdate", {"taskid": taskid, **fields}),
    taskids,
    st.fixed_dictionaries(
        {},
        optional={
            "status": statuses,
            "subject": subjects,
            "description": st.text(max_size=8),
        },
    ),
)
valid_updates = st.builds(
    lambda taskid, status, subject: TaskOp(
        "TaskUpdate",
        {"taskid": taskid, "status": status, **({"subject": subject} if subject else {})},
    ),
    existing_ids,
    st.sampled_from(STATUSES),
    st.none() | st.text(min_size=1, max_size=6),
)
strays = st.sampled_from(
    [TaskOp("TaskList", {}), TaskOp("TaskUpdate", {"id": 1, "state": "done"}), TaskOp("X", {})]
)
# Weighted: about 2 creates, 3 updates (2 of them valid) for each stray operation.
OP_KINDS = {"create": creates, "valid update": valid_updates, "update": updates, "stray": strays}
ops_strategy = st.sampled_from(
    ["create", "create", "valid update", "valid update", "update", "stray"]
).flatmap(lambda kind: OP_KINDS[kind])
op_sequences = st.lists(ops_strategy, max_size=30)


def apply_like_the_tool(store: TaskStore, op: TaskOp) -> TaskOp | None:
    """What the tool path does: validate the input, apply the dumped arguments, catch errors.

    Returns the operation the log records as a successful result (replayed later), or None.
    """
    model = TOOL_ARGS.get(op.name)
    if model is None:
        return None
    try:
        args = model.model_validate(op.args).model_dump(exclude_none=True)
        recorded = TaskOp(op.name, args, op.at)
        store.apply(recorded)
    except (ValidationError, TaskError):
        return None
    return recorded


@settings(max_examples=200, deadline=None)
@given(op_sequences)
def test_replay_equals_the_live_store_after_every_prefix(ops: list[TaskOp]) -> None:
    live = TaskStore()
    recorded: list[TaskOp] = []
    for op in ops:
        done = apply_like_the_tool(live, op)
        if done is not None:
            recorded.append(done)

        # the log holds the successful calls alone
        assert replay(recorded) == live

    ids = [t.taskid for t in live.all()]
    assert ids == list(range(1, len(ids) + 1))
    assert sum(op.name == "TaskCreate" for op in recorded) == len(ids)
    assert all(t.status in STATUSES for t in live.all())

    # every other create in a form replay no longer reads: those tasks are gone, every
    # other task keeps the id and the state the live store gave it
    creates = [n for n, op in enumerate(recorded) if op.name == "TaskCreate"]
    aged = set(creates[1::2])
    old_form = [
        TaskOp(op.name, {"title": op.args["subject"]}) if n in aged else op
        for n, op in enumerate(recorded)
    ]
    gone = {creates.index(n) + 1 for n in aged}
    assert replay(old_form).all() == [t for t in live.all() if t.taskid not in gone]


@settings(max_examples=200, deadline=None)
@given(op_sequences)
def test_the_active_count_is_the_number_of_active_tasks_and_survives_a_snapshot(
    ops: list[TaskOp],
) -> None:
    store = TaskStore()
    for op in ops:
        store.apply_or_skip(op)
        assert store.active_count == len(store.active())
    restored = TaskStore.restore(store.snapshot())
    assert restored is not None and restored.active_count == len(store.active())
