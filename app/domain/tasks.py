"""The session TaskStore: pure, rebuilt by replaying the log's task operations.

There is no task table: a store is what replaying the session's TaskCreate /
TaskUpdate calls (and REST task events) in log order produces. Every live
operation goes through the same `apply`, so live and replayed stores cannot
disagree. An operation whose arguments no longer validate (an old log format)
is skipped on replay, as the seed allows; a skipped TaskCreate still uses up the id
it was given, so the ids after it stay those the live store gave. A long log is
replayed from a snapshot of the store part-way through it (`snapshot` / `restore`),
which gives the same store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

TaskStatus = Literal["pending", "inprogress", "completed", "deleted"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"pending", "inprogress"})
TaskOpName = Literal["TaskCreate", "TaskUpdate"]
TASK_WRITE_TOOLS: frozenset[str] = frozenset({"TaskCreate", "TaskUpdate"})
SNAPSHOT_VERSION = 1


class TaskError(Exception):
    """An operation the store refuses; the message is written for the model to read."""


class UnknownTask(TaskError):
    pass


class TaskCreateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1, max_length=500, description="A one-line subject.")
    description: str = Field(default="", max_length=20_000, description="The details.")


class TaskUpdateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    taskid: int = Field(ge=1, description="The task to change (it cannot be changed itself).")
    status: TaskStatus | None = None
    subject: str | None = Field(default=None, min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=20_000)

    @model_validator(mode="after")
    def _changes_something(self) -> TaskUpdateArgs:
        if self.status is None and self.subject is None and self.description is None:
            raise ValueError("give at least one of status, subject, description")
        return self


class Task(BaseModel):
    taskid: int
    status: TaskStatus
    subject: str
    description: str
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class TaskOp:
    """One recorded task operation, as replay reads it from the log."""

    name: str
    args: dict[str, Any]
    at: datetime | None = None


class TaskStore:
    def __init__(self) -> None:
        self._tasks: dict[int, Task] = {}
        self._next_id = 1
        self._active = 0  # kept as tasks change: the reminder asks before every request

    # --- operations ---------------------------------------------------------
    def create(self, args: TaskCreateArgs, at: datetime | None = None) -> Task:
        task = Task(
            taskid=self._next_id,
            status="pending",
            subject=args.subject,
            description=args.description,
            created_at=at,
            updated_at=at,
        )
        self._tasks[task.taskid] = task
        self._next_id += 1
        self._active += 1
        return task

    def update(self, args: TaskUpdateArgs, at: datetime | None = None) -> Task:
        current = self.get(args.taskid)
        changes = args.model_dump(exclude_none=True, exclude={"taskid"})
        task = current.model_copy(update={**changes, "updated_at": at or current.updated_at})
        self._tasks[task.taskid] = task
        self._active += (task.status in ACTIVE_STATUSES) - (current.status in ACTIVE_STATUSES)
        return task

    def apply(self, op: TaskOp) -> Task:
        """Validate and apply one operation; raises ValidationError or TaskError."""
        if op.name == "TaskCreate":
            return self.create(TaskCreateArgs.model_validate(op.args), op.at)
        if op.name == "TaskUpdate":
            return self.update(TaskUpdateArgs.model_validate(op.args), op.at)
        raise TaskError(f"{op.name} is not a task operation")

    def apply_or_skip(self, op: TaskOp) -> None:
        """Apply `op` as replay does: an operation the store refuses changes no task.

        The log records only operations that succeeded, so a TaskCreate it holds had its
        id; one replay cannot read (an old form) still uses that id up, so every later
        task gets the id it was given and updates address the tasks they did."""
        try:
            self.apply(op)
        except (ValidationError, TaskError):
            if op.name == "TaskCreate":
                self._next_id += 1

    # --- reads --------------------------------------------------------------
    def get(self, taskid: int) -> Task:
        task = self._tasks.get(taskid)
        if task is None:
            raise UnknownTask(f"task {taskid} does not exist (TaskList shows every task)")
        return task

    def all(self) -> list[Task]:
        return list(self._tasks.values())

    def active(self) -> list[Task]:
        return [t for t in self._tasks.values() if t.status in ACTIVE_STATUSES]

    @property
    def active_count(self) -> int:
        return self._active

    # --- snapshots ----------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The store as JSON, for `restore`."""
        return {
            "version": SNAPSHOT_VERSION,
            "next_id": self._next_id,
            "tasks": [task.model_dump(mode="json") for task in self._tasks.values()],
        }

    @classmethod
    def restore(cls, data: dict[str, Any]) -> TaskStore | None:
        """The store a `snapshot` was taken of; None for one this code cannot read (of
        another version, or damaged), which the caller replays instead."""
        if data.get("version") != SNAPSHOT_VERSION:
            return None
        store = cls()
        try:
            tasks = [Task.model_validate(task) for task in data["tasks"]]
            store._next_id = int(data["next_id"])
        except (KeyError, TypeError, ValueError):  # ValidationError is a ValueError
            return None
        store._tasks = {task.taskid: task for task in tasks}
        store._active = sum(1 for task in tasks if task.status in ACTIVE_STATUSES)
        return store

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskStore) and self.all() == other.all()

    __hash__ = None  # type: ignore[assignment]


def replay(ops: Iterable[TaskOp], start: TaskStore | None = None) -> TaskStore:
    """The store the operations produce (applied to `start`, changed in place, if
    given); unreadable or refused ones are skipped."""
    store = TaskStore() if start is None else start
    for op in ops:
        store.apply_or_skip(op)
    return store


# --- text for the model -----------------------------------------------------
_LINE_BREAKS = {
    "\r\n": "\\r\\n",
    "\n": "\\n",
    "\r": "\\r",
    "\v": "\\v",
    "\f": "\\f",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_LINE_BREAK = re.compile("|".join(re.escape(k) for k in _LINE_BREAKS))


def subject_line(subject: str) -> str:
    """A subject as every text for the model writes it (reminder, tool results, snapshot):
    one line, each line break `str.splitlines` knows written as its escape, so a subject
    can neither add a line to a list nor read differently from one form to another."""
    return _LINE_BREAK.sub(lambda m: _LINE_BREAKS[m.group()], subject)


def task_line(task: Task) -> str:
    """A task's one line: `[taskid] status: subject`."""
    return f"[{task.taskid}] {task.status}: {subject_line(task.subject)}"


def render_task(task: Task) -> str:
    lines = [task_line(task)]
    if task.description:
        lines.append(f"    {task.description}")
    return "\n".join(lines)


def render_summary(store: TaskStore) -> str:
    tasks = store.all()
    counts = {
        s: sum(1 for t in tasks if t.status == s)
        for s in ("pending", "inprogress", "completed", "deleted")
    }
    noun = "task" if len(tasks) == 1 else "tasks"
    head = f"{len(tasks)} {noun}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    brief = "\n".join(task_line(t) for t in tasks)
    return f"{head}\n{brief}" if brief else head


def render_snapshot(store: TaskStore, max_chars: int | None = None) -> str:
    """Every task, every status, with descriptions: what survives a compaction.

    It enters requests (a compacted segment's opening, a movement's prompt, TaskList's
    result), so it is held to `max_chars`: a list too long for it shows the active tasks
    first, each description cut to one short line, and ends saying how many of its tasks
    it shows ("N of M tasks shown")."""
    tasks = store.all()
    if not tasks:
        return "The task list is empty."
    whole = "\n".join(render_task(t) for t in tasks)
    if max_chars is None or len(whole) <= max_chars:
        return whole
    first = sorted(tasks, key=lambda t: t.status not in ACTIVE_STATUSES)  # stable
    described = max(40, max_chars // 40)  # a description's share when the list is cut
    lines = fitted_lines((render_task(_cut_description(t, described)) for t in first), max_chars)
    left = first[len(lines) :]
    active = sum(1 for t in left if t.status in ACTIVE_STATUSES)
    if left:
        lines.append(
            f"{len(tasks) - len(left)} of {len(tasks)} tasks shown (active first; "
            f"{active} active not shown); TaskGet shows a task in full."
        )
    else:
        lines.append("(descriptions cut to one line; TaskGet shows a task in full)")
    return "\n".join(lines)


OMITTED_LINE_CHARS = 120
"""Room kept at the end of a cut list (or reminder) for the line saying what it left out."""


def fitted_lines(lines: Iterable[str], max_chars: int) -> list[str]:
    """The first of `lines` that fit, one per line, in `max_chars` less the room for the
    closing line that says what was left out (the caller writes it)."""
    room = max(0, max_chars - OMITTED_LINE_CHARS)
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    return kept


def _cut_description(task: Task, limit: int) -> Task:
    first_line = task.description.split("\n", 1)[0]
    if len(first_line) > limit:
        first_line = first_line[: limit - 1] + "…"
    if first_line == task.description:
        return task
    return task.model_copy(update={"description": first_line})


def render_task_list(store: TaskStore, max_chars: int | None = None) -> str:
    """What TaskList answers: the snapshot (held to `max_chars`) and the counts."""
    return f"{render_snapshot(store, max_chars)}\n\n{render_summary(store).splitlines()[0]}"
