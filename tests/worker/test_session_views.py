"""A chat turn gives the session's view (segment, task list, request messages) back to the
process's holder once its end committed, with the answer that end wrote: the session's
next reader (its next turn, a REST task route), whose write follows that answer, then
starts without reading the log. A turn whose end did not commit gives nothing back: its
answer may never be in the log. The REST task routes and the turns share that one view."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

import app.worker.runner as runner_module
from app.db.engine import Database
from app.db.models import Job
from app.domain.items import AssistantMessage, UserMessage
from app.services.chat import IfBusy, send_message
from app.services.leases import LeaseLost
from app.services.session_view import take_view
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, reply, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, running

pytestmark = pytest.mark.timeout(60)


async def test_a_turn_gives_back_a_view_holding_the_answer_its_end_wrote(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = agent_settings(make_settings, fake_llm)
    fake_llm.reply("Done.")
    async with runtime(settings, with_runner=False) as parts:
        job_id = await enqueue_turn(parts.database, "Hello.")
        async with running(parts, settings, "runner"):
            await wait_until(lambda: has_status(parts.database, job_id, TERMINAL), seconds=30)
        job = await job_of(parts.database, job_id)
        view = take_view(parts.database.caches, job.session_id)

    assert job.status == "succeeded"
    assert view.whole and view.last_seq == 2
    assert [type(item) for item in view.items] == [UserMessage, AssistantMessage]


async def test_a_turn_whose_end_did_not_commit_gives_no_view_back(
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
        async with running(parts, settings, "runner"):
            await asyncio.wait_for(ended.wait(), timeout=30)
        job = await job_of(parts.database, job_id)
        view = take_view(parts.database.caches, job.session_id)

    assert job.status == "running"  # its end never committed
    assert not view.tasks_loaded  # a new view: the next reader reads the log


async def test_a_turn_whose_end_takes_the_orm_hands_on_the_answer_it_wrote(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Past the memory's L2 window a turn's end also queues the chain's summary job, which
    takes the ORM in the end's unit. The view it gives back holds the answer where that
    unit put it."""
    settings = agent_settings(make_settings, fake_llm, memory_l2_window_turns=1)
    fake_llm.always(lambda body: reply("Done."))  # the turns, and the summary
    async with runtime(settings, with_runner=False) as parts:
        first_id = await enqueue_turn(parts.database, "One.")
        async with running(parts, settings, "runner"):
            await wait_until(lambda: has_status(parts.database, first_id, TERMINAL), seconds=30)
            session_id = (await job_of(parts.database, first_id)).session_id

            async def second_turn(db: AsyncSession) -> str:
                return (await send_message(db, "acme", session_id, "Two.", IfBusy.reject)).id

            second_id = await parts.database.write(second_turn)
            await wait_until(lambda: has_status(parts.database, second_id, TERMINAL), seconds=30)
        async with parts.database.read() as db:
            query = select(Job.kind).where(col(Job.session_id) == session_id)
            kinds = sorted((await db.exec(query)).all())
        view = take_view(parts.database.caches, session_id)

    assert kinds == ["chat", "chat", "summary"]  # the second end queued it
    assert view.whole and view.last_seq == 4
    assert [type(item) for item in view.items] == [
        UserMessage,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
    ]


async def test_a_rest_task_write_between_turns_reaches_the_next_turn_without_a_log_read(
    make_settings: Any, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REST write takes the view the first turn gave back (the log still ends at its
    answer), adds its task and its item, and gives it back; the next turn starts from it:
    neither replays the task list nor reads the segment, and the turn's TaskList still
    shows the task."""
    from app.db.repositories.items import ItemRepository
    from app.db.repositories.task_checkpoints import TaskCheckpointRepository
    from app.main import create_app
    from tests.support.apps import client_for
    from tests.support.chat import new_session

    settings = make_settings(
        anthropic_base_url=fake_llm.url, llm_max_retries=0, worker_poll_seconds=0.05
    )
    task_reads: list[str] = []
    for repository, method in (
        (ItemRepository, "by_tool_names"),
        (TaskCheckpointRepository, "with_items"),
    ):
        real = getattr(repository, method)

        def recorded(*args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
            task_reads.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(repository, method, recorded)
    application = create_app(settings)
    async with application.router.lifespan_context(application), client_for(application) as client:
        database: Database = application.state.database
        snapshot_reads = 0
        read_statements = database.read_statements

        async def counted(work: Any) -> Any:
            nonlocal snapshot_reads
            snapshot_reads += 1
            return await read_statements(work)

        database.read_statements = counted  # type: ignore[method-assign]
        session_id = await new_session(client)
        fake_llm.reply("Planned.")
        first = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "Plan."}
        )
        assert first.json()["job"]["status"] == "succeeded", first.text
        task_reads.clear()
        reads_before = snapshot_reads

        made = await client.post(
            f"/sessions/{session_id}/tasks", json={"subject": "from the user", "description": ""}
        )
        fake_llm.reply(tool_use("TaskList", {}, id="toolu_list"))
        fake_llm.reply("Listed.")
        second = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "List."}
        )

    assert made.status_code == 201, made.text
    assert second.json()["job"]["status"] == "succeeded", second.text
    listed = next(
        block["content"]
        for block in fake_llm.requests[-1].messages[-1]["content"]
        if block["type"] == "tool_result"
    )
    assert "from the user" in str(listed)
    assert (task_reads, snapshot_reads - reads_before) == ([], 0)
