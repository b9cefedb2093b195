"""The task reminder: when to nudge the agent about its tasks, and what the nudge says.

Requests are numbered 1, 2, … per session (each LLM call of the main thread,
each tool-loop step included). If request k's response called TaskCreate or
TaskUpdate, the first request that may carry a reminder is k + N + 1; after a
reminder in request r, the next is r + M at the earliest. Nothing fires while no
task is active.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.tasks import Task

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


def reminder_text(active: Sequence[Task]) -> str:
    lines = "\n".join(f"- taskid {t.taskid} [{t.status}] {t.subject}" for t in active)
    return (
        f"{OPEN_TAG}\n"
        "You have active tasks that have not been updated for a while. Keep the list true: "
        "TaskUpdate a task to inprogress when you start it and to completed when it is done; "
        "ignore this if they are current.\n"
        f"{lines}\n{CLOSE_TAG}"
    )
