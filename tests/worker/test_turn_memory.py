"""A chat turn's end stores its memory (L2/L3) in the transaction that records the end;
the texts that memory cleans are cleaned before that transaction, so that it (on SQLite,
the process's one writer thread) only looks them up and inserts."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlmodel import col, select

from app.db.models import MemoryDetail, MemoryTurn
from app.memory import noise
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, running

pytestmark = pytest.mark.timeout(60)

WRITER_THREAD = "strata-db-writer"


async def test_a_turns_memory_texts_are_cleaned_outside_its_end_transaction(
    make_settings: Any, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every turn's texts cleaned on a thread of their own (`thread_chars` 0), no
    cleaning runs on the event loop's thread (where a PostgreSQL transaction runs) nor on
    the SQLite writer's: the end's transaction cleans nothing."""
    settings = agent_settings(make_settings, fake_llm, memory_clean_thread_chars=0)
    fake_llm.reply(tool_use("current_time", {}))
    fake_llm.reply("It is \x1b[1mnoon\x1b[0m.")
    threads: list[str] = []
    inner = noise._clean_once

    def recorded(text: str) -> str:
        threads.append(threading.current_thread().name)
        return inner(text)

    monkeypatch.setattr(noise, "_clean_once", recorded)
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "What time is it?")
        async with running(parts, settings, "runner"):
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)
        session_id = (await job_of(parts.database, job_id)).session_id
        async with parts.database.read() as db:
            query = select(MemoryTurn).where(col(MemoryTurn.session_id) == session_id)
            [turn] = (await db.exec(query)).all()
            query_details = select(MemoryDetail.kind).where(MemoryDetail.turn_id == turn.id)
            kinds = sorted((await db.exec(query_details)).all())

    assert (turn.user_text, turn.assistant_text) == ("What time is it?", "It is noon.")
    assert kinds == ["tool_input", "tool_output"]
    assert threads  # the turn's texts were cleaned
    loop_thread = threading.current_thread().name
    assert [name for name in threads if name in (loop_thread, WRITER_THREAD)] == []
