"""The task reminder as a `pre_llm_request` interceptor, backed by the session's state.

It only ever edits the outbound copy of a request; the log never holds the
reminder. Its counters live on the session row, so a restart changes nothing:
the next reminder comes exactly when it would have without the restart.
"""

from __future__ import annotations

from app.db.engine import UnitsOfWork
from app.db.repositories.sessions import SessionRepository
from app.domain.reminder import reminder_text, should_remind
from app.engine.llm import LLMRequest
from app.engine.requests import append_to_last_user_text
from app.services.tasks import load_store
from app.settings import Settings


class TaskReminder:
    def __init__(self, settings: Settings, database: UnitsOfWork, session_id: str) -> None:
        self.settings = settings
        self.database = database
        self.session_id = session_id

    async def __call__(self, request: LLMRequest) -> LLMRequest:
        async with self.database.read() as db:
            state = await SessionRepository(db).reminder_state(self.session_id)
            if state is None:
                return request
            active = (await load_store(db, self.session_id)).active()
        if not should_remind(
            state,
            len(active),
            since_write=self.settings.reminder_requests_since_task_write,
            between=self.settings.reminder_requests_between_reminders,
        ):
            return request
        await self.database.write(
            lambda db: SessionRepository(db).mark_reminder(self.session_id, state.requests_done + 1)
        )
        append_to_last_user_text(request.messages, reminder_text(active))
        return request
