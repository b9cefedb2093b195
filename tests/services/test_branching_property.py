"""Fork and rewind are exact: for any log and any point of it, a forked or rewound session
has the task list and sends the request messages of a session that only ever had the kept
items (and what came after the fork or rewind); at any turn's boundary, its memory is that
session's too."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.db.repositories.rows import RowRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.ids import new_id
from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    ItemPayload,
    Origin,
    TaskEvent,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    user_text,
)
from app.engine.requests import to_messages
from app.memory.render import DetailHint
from app.services import branching
from app.services.items import append_item, segment_payloads
from app.services.memory import BlockLimits, memory_block, project_turns
from app.services.tasks import load_store
from tests.support.databases import database_with

TENANT = "t"

_subject = st.sampled_from(["plan", "build", "test", "ship"])
_status = st.sampled_from(["pending", "inprogress", "completed", "deleted"])
_create = st.fixed_dictionaries({"subject": _subject, "description": st.just("")})
_update = st.fixed_dictionaries({"taskid": st.integers(1, 4), "status": _status})

# one step of a log: a user message, an answer, a task tool call with its result, a REST
# task change, or a compaction (a new segment); a step's end is always a valid point
STEP = st.one_of(
    st.tuples(st.just("user"), st.text("abc ", min_size=1, max_size=5)),
    st.tuples(st.just("answer"), st.text("xyz ", min_size=1, max_size=5)),
    st.tuples(st.just("TaskCreate"), _create),
    st.tuples(st.just("TaskUpdate"), _update),
    st.tuples(st.just("rest-create"), _create),
    st.tuples(st.just("rest-update"), _update),
    st.tuples(st.just("compact"), st.just("summary")),
)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url) as db:
        yield db


def _payloads(step: tuple[str, Any], n: str) -> list[ItemPayload]:
    kind, value = step
    if kind == "user":
        return [user_text(value)]
    if kind == "answer":
        return [AssistantMessage(content=[TextBlock(text=value)])]
    if kind in ("TaskCreate", "TaskUpdate"):
        call = ToolUseBlock(id=f"toolu_{n}", name=kind, input=value)
        result = ToolResult(tool_use_id=call.id, content="ok", name=kind, input=value)
        return [AssistantMessage(content=[call]), result]
    if kind in ("rest-create", "rest-update"):
        op = "TaskCreate" if kind == "rest-create" else "TaskUpdate"
        return [TaskEvent(op=op, input=value, taskid=value.get("taskid", 1))]
    return [CompactSummary(text=value)]


async def _new_session(database: Database, continues_from: str | None = None) -> str:
    session_id = new_id("ses")

    async def add(db: AsyncSession) -> None:
        row = Session(id=session_id, tenant=TENANT, continues_from=continues_from)
        await SessionRepository(db).save(row)

    await database.write(add)
    return session_id


async def _append(
    database: Database, session_id: str, steps: list[tuple[str, Any]], name: str
) -> list[int]:
    """Append the steps (their tool calls' ids named after `name` and their place); the
    log's end after each."""
    ends: list[int] = []

    async def append(db: AsyncSession) -> None:
        end = 0
        for n, step in enumerate(steps):
            if step[0] == "compact":
                await SessionRepository(db).start_segment(session_id)
            for payload in _payloads(step, f"{name}{n}"):
                end = (await append_item(db, session_id, payload, Origin.system)).seq
            ends.append(end)

    if steps:
        await database.write(append)
    return ends


async def _state(database: Database, session_id: str) -> tuple[Any, Any]:
    """The task list (without times) and the request messages of the session."""
    async with database.read() as db:
        segment = await SessionRepository(db).current_segment(session_id)
        assert segment is not None
        lineage = await SessionRepository(db).lineage(session_id)
        items = await segment_payloads(db, session_id, segment, lineage)
        store = await load_store(db, session_id)
    tasks = [(t.taskid, t.subject, t.status, t.description) for t in store.all()]
    messages = [m.model_dump(mode="json") for m in to_messages(items)]
    return tasks, messages


@pytest.mark.timeout(600)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    log=st.lists(STEP, min_size=1, max_size=8),
    cut=st.integers(0, 8),
    after=st.lists(STEP, max_size=4),
    how=st.sampled_from(["fork", "rewind", "undo"]),
)
async def test_a_forked_or_rewound_session_equals_one_that_had_only_the_kept_items(
    database: Database,
    log: list[tuple[str, Any]],
    cut: int,
    after: list[tuple[str, Any]],
    how: str,
) -> None:
    cut = min(cut, len(log))
    session_id = await _new_session(database)
    ends = await _append(database, session_id, log, "log")
    point = ends[cut - 1] if cut else 0

    if how == "fork":

        async def fork(db: AsyncSession) -> str:
            return (await branching.fork_session(db, TENANT, session_id, at_seq=point)).id

        target = await database.write(fork)
        kept = log[:cut]
    else:

        async def rewind(db: AsyncSession) -> branching.Rewound:
            return await branching.rewind_session(db, TENANT, session_id, to_seq=point)

        first = await database.write(rewind)
        target, kept = session_id, log[:cut]
        if how == "undo":  # more steps after the rewind, then back to the end before it
            await _append(database, session_id, after, "after")

            async def undo(db: AsyncSession) -> branching.Rewound:
                return await branching.rewind_session(db, TENANT, session_id, to_seq=first.from_seq)

            await database.write(undo)
            kept = log
    await _append(database, target, after, "after")
    reference = await _new_session(database)
    await _append(database, reference, kept, "log")
    await _append(database, reference, after, "after")

    assert await _state(database, target) == await _state(database, reference)


async def _project(database: Database, *session_ids: str) -> None:
    """Each turn of these sessions' own items into memory, as each turn's end does."""

    async def project(db: AsyncSession) -> None:
        for session_id in session_ids:
            row = await RowRepository(db).by_id(Session, session_id)
            assert row is not None
            await project_turns(db, session_id, range(row.current_turn + 1))

    await database.write(project)


_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}(:\d{2})?")


async def _block_after(database: Database, session_id: str) -> str:
    """The memory block of a session continuing `session_id`, its times left out (the
    reference's turns ended at other times)."""
    successor = await _new_session(database, continues_from=session_id)
    limits = BlockLimits(window=20, max_chars=9_500, l2_ratio=0.7)
    async with database.read() as db:
        block = await memory_block(
            db, TENANT, successor, limits=limits, tz=ZoneInfo("UTC"), hint=DetailHint.detail_tool
        )
    return _MOMENT.sub("<time>", block.text)


def _at_a_turns_boundary(log: list[tuple[str, Any]], cut: int) -> int:
    """The first place at or after `cut` where a turn begins (or the log ends)."""
    while cut < len(log) and log[cut][0] != "user":
        cut += 1
    return cut


@pytest.mark.timeout(600)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    log=st.lists(STEP, min_size=1, max_size=8),
    cut=st.integers(0, 8),
    said=st.text("abc ", min_size=1, max_size=5),
    after=st.lists(STEP, max_size=4),
    how=st.sampled_from(["fork", "rewind", "undo"]),
)
async def test_a_forked_or_rewound_sessions_memory_equals_one_of_only_the_kept_turns(
    database: Database,
    log: list[tuple[str, Any]],
    cut: int,
    said: str,
    after: list[tuple[str, Any]],
    how: str,
) -> None:
    """Memory is kept by turns: at a turn's boundary (every point `to_turn`, `at_turn`,
    `before_turn` and a rollback name), with a new turn after it."""
    cut = _at_a_turns_boundary(log, min(cut, len(log)))
    after = [("user", said), *after]
    session_id = await _new_session(database)
    ends = await _append(database, session_id, log, "log")
    point = ends[cut - 1] if cut else 0
    await _project(database, session_id)

    if how == "fork":

        async def fork(db: AsyncSession) -> str:
            return (await branching.fork_session(db, TENANT, session_id, at_seq=point)).id

        target = await database.write(fork)
    else:

        async def rewind(db: AsyncSession) -> branching.Rewound:
            return await branching.rewind_session(db, TENANT, session_id, to_seq=point)

        first = await database.write(rewind)
        target = session_id
        if how == "undo":  # a turn after the rewind, then back to the end before it
            await _append(database, session_id, after, "after")
            await _project(database, session_id)

            async def undo(db: AsyncSession) -> branching.Rewound:
                return await branching.rewind_session(db, TENANT, session_id, to_seq=first.from_seq)

            await database.write(undo)
    kept = log if how == "undo" else log[:cut]
    await _append(database, target, after, "after")
    await _project(database, target)
    reference = await _new_session(database)
    await _append(database, reference, kept, "log")
    await _append(database, reference, after, "after")
    await _project(database, reference)

    assert await _block_after(database, target) == await _block_after(database, reference)
