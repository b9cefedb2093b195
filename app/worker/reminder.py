"""The task reminder as a `pre_llm_request` interceptor, over the job's session in memory.

It only ever edits the outbound copy of a request; the log never holds the reminder,
which ends the request as a block of its own, marked volatile so that the cache
breakpoint sits on the block before it. Its counters live on the session row (read by
the step's probe), so a restart changes nothing: the next reminder comes exactly when it
would have without the restart. A reminder counts as shown only once the request that
carried it got an answer (it is recorded with that answer), so a failed request's retry
carries it again.

A reminder that falls due while the whole task list is in the request already (a
compaction's snapshot, or a `TaskList` result since the last user message) is not
added, but counts as shown: the model is looking at the list.

The reminder asks the model to `TaskUpdate` its tasks, so only requests that offer
that tool carry it (`task_reminders`): a chat session or a movement without it never
gets one, whatever its list holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.reminder import reminder_text, should_remind
from app.engine.llm import LLMRequest
from app.engine.loop import Interceptor
from app.engine.requests import task_list_in_view, with_text_at_end
from app.settings import Settings
from app.worker.turn_store import DbTurnStore


class TaskReminder:
    def __init__(self, settings: Settings, store: DbTurnStore) -> None:
        self.settings = settings
        self.store = store

    async def __call__(self, request: LLMRequest) -> LLMRequest:
        session = self.store.session
        due = should_remind(
            session.reminder,
            session.tasks.active_count,  # the list itself only when it is due
            since_write=self.settings.reminder_requests_since_task_write,
            between=self.settings.reminder_requests_between_reminders,
        )
        self.store.reminder_pending = due
        if due and not task_list_in_view(session.items):
            text = reminder_text(session.tasks.active(), self.settings.reminder_max_chars)
            request.messages = with_text_at_end(request.messages, text)
            request.volatile_blocks += 1  # sent once: no cache breakpoint on it
        return request


def task_reminders(
    settings: Settings, store: DbTurnStore, tool_names: Sequence[str]
) -> list[Interceptor]:
    """The reminder interceptor for requests offering `tool_names`: none without
    `TaskUpdate`, the tool it asks the model to use."""
    return [TaskReminder(settings, store)] if "TaskUpdate" in tool_names else []
