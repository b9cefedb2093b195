"""A chat turn leaves what it held of its session (segment, task list) to the session's
next turn in this process once its end committed, with the answer that end wrote: the
next turn, whose user item follows that answer, then starts without reading the log.
A turn whose end did not commit leaves nothing: its answer may never be in the log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

import app.worker.runner as runner_module
from app.db.models import Job
from app.domain.items import AssistantMessage, UserMessage
from app.services.chat import IfBusy, send_message
from app.services.leases import LeaseLost
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, reply
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, running

pytestmark = pytest.mark.timeout(60)


async def test_a_turns_picture_holds_the_answer_its_end_wrote(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm)
    fake_llm.reply("Done.")
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Hello.")
        async with running(parts, settings, "runner") as runner:
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)
        job = await job_of(parts.database, job_id)

    picture = runner.deps.pictures.take(job.session_id)
    assert job.status == "succeeded"
    assert picture is not None and picture.last_seq == 2
    assert [type(item) for item in picture.items] == [UserMessage, AssistantMessage]


async def test_a_turn_whose_end_did_not_commit_leaves_no_picture(
    make_settings: Any, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its lease was taken over before its end: the end writes nothing, the answer is
    not in the log, and the session's next turn here reads the log instead."""
    settings = agent_settings(make_settings, fake_llm, job_heartbeat_seconds=3600.0)
    fake_llm.reply("Done.")
    ended = asyncio.Event()

    async def taken_over(db: Any, job: Any) -> None:
        ended.set()
        raise LeaseLost(job.id)

    monkeypatch.setattr(runner_module, "fence", taken_over)
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Hello.")
        async with running(parts, settings, "runner") as runner:
            await asyncio.wait_for(ended.wait(), timeout=30)
        job = await job_of(parts.database, job_id)

    assert job.status == "running"  # its end never committed
    assert runner.deps.pictures.take(job.session_id) is None


async def test_a_turn_whose_end_takes_the_orm_hands_on_the_answer_it_wrote(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Past the memory's L2 window a turn's end also queues the chain's summary job, which
    takes the ORM in the end's unit. The picture it hands on holds the answer where that
    unit put it."""
    settings = agent_settings(make_settings, fake_llm, memory_l2_window_turns=1)
    fake_llm.always(lambda body: reply("Done."))  # the turns, and the summary
    async with runtime(settings, with_runner=False) as parts:
        first_id = await enqueue_turn(parts.database, "One.")
        async with running(parts, settings, "runner") as runner:
            await wait_until(lambda: has_status(parts.database, first_id, TERMINAL), seconds=30)
            session_id = (await job_of(parts.database, first_id)).session_id

            async def second_turn(db: AsyncSession) -> str:
                return (await send_message(db, "acme", session_id, "Two.", IfBusy.reject)).id

            second_id = await parts.database.write(second_turn)
            await wait_until(lambda: has_status(parts.database, second_id, TERMINAL), seconds=30)
        async with parts.database.read() as db:
            query = select(Job.kind).where(col(Job.session_id) == session_id)
            kinds = sorted((await db.exec(query)).all())

    picture = runner.deps.pictures.take(session_id)
    assert kinds == ["chat", "chat", "summary"]  # the second end queued it
    assert picture is not None and picture.last_seq == 4
    assert [type(item) for item in picture.items] == [
        UserMessage,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
    ]
