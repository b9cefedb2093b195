"""An LLM response's item and the request it answered are one UPDATE of the session's
row, at every agent step: its place in the log, and the counters the task reminder and
the usage figures read (not two statements, one for the place and one for the count)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.db.prepared import Prepared
from app.domain.errors import InvalidInput
from app.domain.items import AssistantMessage, Origin, TextBlock, user_text
from app.domain.usage import Usage
from app.services.items import append_answered, append_item
from tests.support.databases import database_with

SESSION = "ses_answered"


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


async def test_a_responses_place_and_its_request_are_one_update_of_the_session(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_updates: list[str] = []
    real = Prepared.execute

    async def recorded(self: Prepared, db: Any, params: Any) -> Any:
        if str(self.statement).startswith("UPDATE sessions"):
            session_updates.append(str(self.statement))
        return await real(self, db, params)

    monkeypatch.setattr(Prepared, "execute", recorded)
    answer = AssistantMessage(content=[TextBlock(text="Done.")])
    usage = Usage(input_tokens=120, output_tokens=7)

    async def append(db: AsyncSession) -> int:
        row = await append_answered(
            db,
            SESSION,
            answer,
            turn=1,
            job_id="job_answered",
            wrote_tasks=True,
            usage=usage,
            carried_reminder=True,
        )
        return row.seq

    seq = await database.write(append)
    async with database.read() as db:
        session = await db.get(Session, SESSION)

    assert len(session_updates) == 1
    assert session is not None
    assert (seq, session.last_seq) == (1, 1)
    assert session.llm_requests == 1
    assert (session.last_task_write_request, session.last_reminder_request) == (1, 1)
    assert (session.input_tokens, session.output_tokens) == (120, 7)


async def test_an_append_to_a_session_that_vanished_is_invalid_input_not_a_crash(
    database: Database,
) -> None:
    """Deleted under a running job: the response's and any other item's append say so."""
    answer = AssistantMessage(content=[TextBlock(text="Done.")])

    async def answered(db: AsyncSession) -> None:
        await append_answered(
            db,
            "ses_gone",
            answer,
            turn=1,
            job_id="job_gone",
            wrote_tasks=False,
            usage=None,
            carried_reminder=False,
        )

    async def appended(db: AsyncSession) -> None:
        await append_item(db, "ses_gone", user_text("Hello?"), Origin.user)

    for work in (answered, appended):
        with pytest.raises(InvalidInput, match="ses_gone"):
            await database.write(work)
