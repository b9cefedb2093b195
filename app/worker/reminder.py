"""The task reminder due on a request, over the job's session in memory.

It is a value the loop adds to the outbound copy of a request (`app.engine.loop.Reminder`);
the log never holds the reminder, which ends the request as a block of its own, marked
volatile so that the cache breakpoint sits on the block before it. Its counters live on
the session row (read by the step's probe), so a restart changes nothing: the next
reminder comes exactly when it would have without the restart. A reminder counts as
shown only once the request that carried it got an answer (it is recorded with that
answer), so a failed request's retry carries it again.

A reminder that falls due while the whole task list is in the request already (a
compaction's snapshot, or a `TaskList` result since the last user message) is not
added, but counts as shown: the model is looking at the list.

The reminder asks the model to `TaskUpdate` its tasks, so only requests that offer
that tool carry it (`task_reminder`): a chat session or a movement without it never
gets one, whatever its list holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.items import ItemPayload
from app.domain.reminder import reminder_text, should_remind
from app.engine.loop import Reminder, ReminderSource
from app.engine.requests import task_list_in_view
from app.settings import Settings
from app.worker.job_session import JobSession


class TaskReminder:
    """The reminder due on a request of the job's session, as a value the loop adds to
    the request and reports with its answer."""

    def __init__(self, settings: Settings, session: JobSession) -> None:
        self.settings = settings
        self.session = session

    def __call__(self, items: Sequence[ItemPayload]) -> Reminder | None:
        session = self.session
        due = should_remind(
            session.reminder,
            session.tasks.active_count,  # the list itself only when it is due
            since_write=self.settings.reminder_requests_since_task_write,
            between=self.settings.reminder_requests_between_reminders,
        )
        if not due:
            return None
        if task_list_in_view(items):
            return Reminder(text=None)
        return Reminder(reminder_text(session.tasks.active(), self.settings.reminder_max_chars))


def task_reminder(
    settings: Settings, session: JobSession, tool_names: Sequence[str]
) -> ReminderSource | None:
    """The reminder of requests offering `tool_names`: none without `TaskUpdate`, the
    tool it asks the model to use."""
    return TaskReminder(settings, session) if "TaskUpdate" in tool_names else None
