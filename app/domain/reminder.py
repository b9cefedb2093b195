"""The task reminder: when to nudge the agent about its tasks, and what the nudge says.

Requests are numbered 1, 2, … per session (each LLM call of the main thread,
each tool-loop step included). If request k's response called TaskCreate or
TaskUpdate (or a user changed the list over REST after request k), the first request
that may carry a reminder is k + N + 1; after a reminder in request r, the next is
r + M at the earliest. Nothing fires while no task is active.

The reminder lists one line per active task; a subject is written as every task text
writes it (`subject_line`: line breaks as escapes), so it cannot add a line of its own.
Its task lines are held to a budget: past it, one line says how many it leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.tasks import Task, fitted_lines, subject_line

OPEN_TAG = "<system-reminder>"
CLOSE_TAG = "</system-reminder>"


@dataclass(frozen=True)
class ReminderState:
    """What the session remembers between requests (0 = never)."""

    requests_done: int
    last_task_write_request: int
    last_reminder_request: int


def should_remind(
    state: ReminderState, active_tasks: int, *, since_write: int, between: int
) -> bool:
    """Whether request `state.requests_done + 1` carries a reminder."""
    if active_tasks == 0:
        return False
    request = state.requests_done + 1
    quiet = request - state.last_task_write_request - 1
    cooled = state.last_reminder_request == 0 or request - state.last_reminder_request >= between
    return quiet >= since_write and cooled


def reminder_text(active: Sequence[Task], max_chars: int | None = None) -> str:
    """The reminder listing `active`; its task lines take at most `max_chars`.

    Lines are written only as far as the budget reaches: a session's list may hold
    thousands of active tasks, and writing every line to keep forty costs ~0.5 ms of a
    step at a thousand."""
    every = (f"- taskid {t.taskid} [{t.status}] {subject_line(t.subject)}" for t in active)
    listed = list(every) if max_chars is None else fitted_lines(every, max_chars)
    if len(listed) < len(active):
        left = len(active) - len(listed)
        noun = "task" if left == 1 else "tasks"
        listed.append(f"- … and {left} more active {noun} (TaskList shows every task)")
    lines = "\n".join(listed)
    one = len(active) == 1
    count = "1 active task that has" if one else f"{len(active)} active tasks that have"
    current = "it is" if one else "they are"
    return (
        f"{OPEN_TAG}\n"
        f"You have {count} not been updated for a while. Keep the list true: "
        "TaskUpdate a task to inprogress when you start it and to completed when it is done; "
        f"ignore this if {current} current.\n"
        f"{lines}\n"
        "Do not mention this reminder to the user.\n"
        f"{CLOSE_TAG}"
    )
