"""A running job holds its session in memory: one probe read per step, one write per
LLM response and one per step's tool results, and still sees what others write."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel import col, select

from app.db.engine import Database
from app.db.models import Event
from app.db.prepared import Prepared
from app.db.repositories.sessions import PROBE, SESSION_ROW
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, reply, tool_use
from tests.support.apps import client_for
from tests.support.chat import new_session


@pytest.fixture
async def quiet_app(make_settings: Any, fake_llm: FakeMessagesAPI) -> AsyncIterator[FastAPI]:
    """An agent app whose heartbeat stays out of the counts."""
    from app.main import create_app

    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        llm_max_retries=0,
        worker_poll_seconds=0.05,
        job_heartbeat_seconds=60.0,
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


class Counted:
    """Counts the units of work the runner's job makes through the database: its writes
    (statement units or not), and its reads (its one-statement probe, and any read unit
    or statement read besides)."""

    def __init__(self, database: Database) -> None:
        self.writes = 0
        self.probes = 0
        write, read_unit, peek = database.write, database.read_unit, database.peek
        write_statements, read_statements = database.write_statements, database.read_statements

        async def counted_write(work: Any) -> Any:
            self.writes += 1
            return await write(work)

        async def counted_write_statements(work: Any) -> Any:
            self.writes += 1
            return await write_statements(work)

        async def counted_read_unit(work: Any) -> Any:
            self.probes += 1
            return await read_unit(work)

        async def counted_read_statements(work: Any) -> Any:
            self.probes += 1
            return await read_statements(work)

        async def counted_peek(statement: Any, params: Any) -> Any:
            if statement is PROBE:  # the job's; the runner's claim probe peeks too
                self.probes += 1
            return await peek(statement, params)

        database.write = counted_write  # type: ignore[method-assign]
        database.write_statements = counted_write_statements  # type: ignore[method-assign]
        database.read_unit = counted_read_unit  # type: ignore[method-assign]
        database.read_statements = counted_read_statements  # type: ignore[method-assign]
        database.peek = counted_peek  # type: ignore[method-assign]


CLOCK: tuple[str, dict[str, Any]] = ("current_time", {})
"""A call of a tool that only reads."""


async def _turn_with_steps(
    client: httpx.AsyncClient,
    fake: FakeMessagesAPI,
    steps: int,
    counted: Counted,
    call: tuple[str, dict[str, Any]],
) -> tuple[int, int]:
    session_id = await new_session(client)
    name, args = call
    for n in range(steps):  # two tool calls in each response
        calls = [tool_use(name, args, id=f"toolu_{steps}_{n}_{k}") for k in range(2)]
        fake.enqueue(reply(*calls))
    fake.enqueue(reply("Done."))
    writes, probes = counted.writes, counted.probes
    sent = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "Go."}
    )
    assert sent.status_code == 200, sent.text
    assert sent.json()["job"]["status"] == "succeeded"
    return counted.writes - writes, counted.probes - probes


async def _per_step(
    app: FastAPI, fake: FakeMessagesAPI, call: tuple[str, dict[str, Any]]
) -> tuple[float, float]:
    """Writes and probes per step: a turn of five steps against one of one."""
    counted = Counted(app.state.database)
    async with client_for(app) as client:
        one = await _turn_with_steps(client, fake, 1, counted, call)
        five = await _turn_with_steps(client, fake, 5, counted, call)
    return (five[0] - one[0]) / 4, (five[1] - one[1]) / 4


async def test_a_step_whose_calls_only_read_costs_one_probe_and_one_write(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    """The response and its two results, in one transaction once the calls ran."""
    assert await _per_step(quiet_app, fake_llm, CLOCK) == (1, 1)


async def test_a_step_whose_calls_change_something_writes_the_response_before_they_run(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    """One write for the response, then each TaskCreate writes its effect and its result."""
    create = ("TaskCreate", {"subject": "Ship", "description": "Ship it."})
    assert await _per_step(quiet_app, fake_llm, create) == (3, 1)


def _tool_results(request: RecordedRequest) -> dict[str, str]:
    return {
        block["tool_use_id"]: str(block["content"])
        for block in request.messages[-1]["content"]
        if block["type"] == "tool_result"
    }


async def test_task_changes_made_over_rest_during_a_turn_reach_the_agents_task_list(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """One REST task arrives while the model thinks before its TaskList, another while it
    thinks before its TaskCreate: both are in what the agent is told, and its own task
    takes the next id, as replaying the log gives."""
    session_id = await new_session(agent_client)
    thinking = threading.Event(), threading.Event()
    fake_llm.reply(tool_use("TaskList", {}, id="toolu_list"), held=thinking[0])
    fake_llm.reply(
        tool_use("TaskCreate", {"subject": "agent task", "description": "d"}, id="toolu_new"),
        held=thinking[1],
    )
    fake_llm.reply("Done.")
    tasks = f"/sessions/{session_id}/tasks"

    sent = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "Go."})
    assert sent.status_code == 202
    await fake_llm.wait_for_requests(1)
    first = await agent_client.post(tasks, json={"subject": "from the user", "description": ""})
    thinking[0].set()
    await fake_llm.wait_for_requests(2)
    second = await agent_client.post(tasks, json={"subject": "also the user", "description": ""})
    thinking[1].set()
    requests = await fake_llm.wait_for_requests(3)
    listed = (await agent_client.get(tasks)).json()["data"]

    assert (first.status_code, second.status_code) == (201, 201)
    assert "from the user" in _tool_results(requests[1])["toolu_list"]
    assert _tool_results(requests[2])["toolu_new"].startswith("Created task 3:")
    assert [(t["taskid"], t["subject"]) for t in listed] == [
        (1, "from the user"),
        (2, "also the user"),
        (3, "agent task"),
    ]


async def _one_request_turns(app: FastAPI, fake: FakeMessagesAPI, *texts: str) -> None:
    """A new session's turns, one after another, each answered `Answer to <text>`."""
    async with client_for(app) as client:
        session_id = await new_session(client)
        for text in texts:
            fake.reply(f"Answer to {text}")
            sent = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": text}
            )
            assert sent.json()["job"]["status"] == "succeeded", sent.text


async def test_the_sessions_next_turn_reads_nothing_of_the_log_when_nobody_else_wrote(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn hands the segment it held to the session's next turn in this process, once
    its end (which writes its answer) committed: that turn holds the answer, and its own
    user item follows it, so it reads nothing of the segment, and still sends the whole
    conversation."""
    import app.services.session_view as session_view

    read_after: list[int] = []
    real = session_view.segment_tail  # type: ignore[attr-defined]

    async def recorded(
        db: Any, session_id: str, segment: int, after_seq: int, lineage: Any = None
    ) -> Any:
        read_after.append(after_seq)
        return await real(db, session_id, segment, after_seq, lineage)

    monkeypatch.setattr(session_view, "segment_tail", recorded)
    await _one_request_turns(quiet_app, fake_llm, "First.", "Second.")

    assert read_after == [0]  # the first turn's: its user item is seq 1, its answer 2
    sent_texts = [[b["text"] for b in m["content"]] for m in fake_llm.requests[-1].messages]
    assert sent_texts == [["First."], ["Answer to First."], ["Second."]]


async def test_a_task_written_over_rest_between_turns_reaches_the_next_turn(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    tasks = f"/sessions/{session_id}/tasks"
    fake_llm.reply(tool_use("TaskCreate", {"subject": "agent task", "description": ""}))
    fake_llm.reply("Created.")
    first = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "Plan."}
    )
    assert first.json()["job"]["status"] == "succeeded", first.text
    made = await agent_client.post(tasks, json={"subject": "from the user", "description": ""})
    assert made.status_code == 201, made.text
    fake_llm.reply(tool_use("TaskList", {}, id="toolu_list"))
    fake_llm.reply("Listed.")

    second = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "List."}
    )

    assert second.json()["job"]["status"] == "succeeded", second.text
    listed = _tool_results(fake_llm.requests[-1])["toolu_list"]
    assert "agent task" in listed and "from the user" in listed


async def test_the_sessions_next_turn_builds_only_the_messages_of_its_new_items(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The messages a turn built go to the next turn with its segment: that turn builds
    the previous answer's and its own user item's, not the first turn's again."""
    from app.engine.requests import Conversation

    built: list[object] = []
    real = Conversation._add

    def counted(self: Conversation, item: Any) -> None:
        built.append(item)
        real(self, item)

    monkeypatch.setattr(Conversation, "_add", counted)
    await _one_request_turns(quiet_app, fake_llm, "First.", "Second.")

    assert len(built) == 3  # First. | Answer to First., Second.
    assert len(fake_llm.requests[-1].messages) == 3


async def test_a_chat_turns_end_is_one_statement_unit(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    """Its lease, status, memory and events are prepared statements: no ORM unit (on
    SQLite a statement unit runs without an ORM session)."""
    database: Database = quiet_app.state.database
    units: list[tuple[str, str]] = []
    write, write_statements = database.write, database.write_statements

    async def recorded_write(work: Any) -> Any:
        units.append(("orm", work.__qualname__))
        return await write(work)

    async def recorded_write_statements(work: Any) -> Any:
        units.append(("statements", work.__qualname__))
        return await write_statements(work)

    database.write = recorded_write  # type: ignore[method-assign]
    database.write_statements = recorded_write_statements  # type: ignore[method-assign]
    await _one_request_turns(quiet_app, fake_llm, "Hi.")

    ends = [kind for kind, name in units if name == "Runner._finish.<locals>.finish"]
    assert ends == ["statements"]


async def test_a_chat_turns_end_does_not_read_its_session_again(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's start read the session's row; its end decides from that row whether the
    chain's summaries are due (a merge, the one thing that changes a chain, queues its
    own)."""
    database: Database = quiet_app.state.database
    write_statements = database.write_statements
    ending = False
    read_at_end: list[Any] = []

    async def flagged_write_statements(work: Any) -> Any:
        if work.__qualname__ != "Runner._finish.<locals>.finish":
            return await write_statements(work)

        async def flagged(db: Any) -> Any:
            nonlocal ending
            ending = True
            try:
                return await work(db)
            finally:
                ending = False

        return await write_statements(flagged)

    real = Prepared.execute

    async def recorded(self: Prepared, db: Any, params: Any) -> Any:
        if ending and self is SESSION_ROW:
            read_at_end.append(params)
        return await real(self, db, params)

    database.write_statements = flagged_write_statements  # type: ignore[method-assign]
    monkeypatch.setattr(Prepared, "execute", recorded)
    await _one_request_turns(quiet_app, fake_llm, "Hi.")

    assert read_at_end == []


async def test_a_turns_first_request_needs_no_probe_of_its_own(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    """The turn's start reads its session's row, which says what the step's probe would
    (where the log ends, the reminder's counters); the cancel flag is the claim's."""
    database = quiet_app.state.database
    probes: list[Any] = []
    peek = database.peek

    async def counted_peek(statement: Any, params: Any) -> Any:
        if statement is PROBE:
            probes.append(params)
        return await peek(statement, params)

    database.peek = counted_peek
    async with client_for(quiet_app) as client:
        await _turn_with_steps(client, fake_llm, 0, Counted(database), CLOCK)
        one_request = len(probes)
        await _turn_with_steps(client, fake_llm, 2, Counted(database), CLOCK)

    assert (one_request, len(probes)) == (0, 2)  # then one per step after the first


async def test_a_one_request_turns_answer_is_written_with_its_end(
    quiet_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    """One transaction less per turn: the answer that ends the turn goes into the
    transaction that records the job's end, its events before the job's status."""
    database = quiet_app.state.database
    counted = Counted(database)
    async with client_for(quiet_app) as client:
        session_id = await new_session(client)
        writes = counted.writes
        fake_llm.enqueue(reply("Done."))
        sent = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "Go."}
        )
        spent = counted.writes - writes
    async with database.read() as db:
        query = select(Event).where(col(Event.job_id) == sent.json()["job"]["id"])
        events = (await db.exec(query.order_by(col(Event.id)))).all()

    assert sent.json()["job"]["status"] == "succeeded"
    assert spent == 3  # the message's own write, the claim, and the end with the answer
    kinds = [(e.type, e.data.get("status" if e.type == "job.status" else "kind")) for e in events]
    assert kinds.index(("item.appended", "assistant_message")) < kinds.index(
        ("job.status", "succeeded")
    )
