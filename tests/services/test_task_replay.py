"""How task replay reads the log: plain rows parsed directly must mean what the item models say.

`task_ops` reads task items as plain rows and reads payloads of the exact declared shape
without their pydantic model (a rebuild reads every task item of a session). These tests pin
that shortcut to the model: for any payload, it yields the operation the model-based reading
yields, or raises where that raises; and through the database, the log order, timestamps and
skipped items are what replay has always seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.domain.items import (
    ItemPayload,
    Origin,
    TaskEvent,
    TextBlock,
    ToolResult,
    load_payload,
    user_text,
)
from app.domain.tasks import TaskOp, TaskOpName
from app.services.items import append_item
from app.services.tasks import load_store, task_op_of, task_ops
from tests.support.databases import database_with

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def reference_op(kind: str, data: dict[str, Any], at: datetime) -> TaskOp | None:
    """The reference `task_ops` agrees with: every payload through its model."""
    payload = load_payload(kind, data)
    if isinstance(payload, TaskEvent):
        return TaskOp(payload.op, payload.input, at)
    if isinstance(payload, ToolResult) and not payload.is_error and payload.input is not None:
        return TaskOp(payload.name or "", payload.input, at)
    return None


def _outcome(fn: Any, kind: str, data: dict[str, Any]) -> TaskOp | str | None:
    try:
        result: TaskOp | None = fn(kind, data, AT)
    except ValidationError:
        return "refused"
    return result


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(), inner, max_size=2),
    max_leaves=4,
)
_args = st.dictionaries(st.sampled_from(["subject", "taskid", "status", "x"]), _json, max_size=3)
_odd = _json | _args | st.sampled_from(["true", "false", 1, 0, 1.0, "TaskCreate", "TaskUpdate"])


@st.composite
def stored_payloads(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """Task item payloads as stored: mostly well formed, often with a field of another type,
    a missing or an extra field, content as blocks, or the other kind's fields."""
    kind = draw(st.sampled_from(["tool_result", "task_event", "user_message"]))
    data: dict[str, Any]
    if kind == "task_event" or (draw(st.booleans()) and kind != "tool_result"):
        data = {
            "op": draw(st.sampled_from(["TaskCreate", "TaskUpdate"])),
            "input": draw(_args),
            "taskid": draw(st.integers(1, 9)),
        }
    else:
        data = {
            "tool_use_id": "toolu_1",
            "content": draw(st.text(max_size=5) | st.just([{"type": "text", "text": "ok"}])),
            "is_error": draw(st.booleans()),
            "name": draw(st.sampled_from(["TaskCreate", "TaskUpdate", "", None])),
            "input": draw(st.none() | _args),
        }
    for _ in range(draw(st.integers(0, 2))):
        change = draw(st.sampled_from(["retype", "drop", "extra"]))
        field = draw(st.sampled_from(sorted(data) or ["x"]))
        if change == "retype":
            data[field] = draw(_odd)
        elif change == "drop":
            data.pop(field, None)
        else:
            data[draw(st.sampled_from(["kind", "extra", "taskid", "name"]))] = draw(_odd)
    return kind, data


@settings(max_examples=400, deadline=None)
@given(stored_payloads())
def test_reading_a_payload_directly_agrees_with_its_model(
    stored: tuple[str, dict[str, Any]],
) -> None:
    kind, data = stored
    assert _outcome(task_op_of, kind, data) == _outcome(reference_op, kind, data)


# --- through the database ----------------------------------------------------------------


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, "ses_tasks") as db:
        yield db


async def _append(database: Database, entries: list[tuple[ItemPayload, datetime]]) -> None:
    async def append(session: AsyncSession) -> None:
        for payload, at in entries:
            await append_item(session, "ses_tasks", payload, Origin.system, at=at)

    await database.write(append)


async def test_ops_come_in_log_order_across_tool_names_with_their_times(
    database: Database,
) -> None:
    def result(op: str, args: dict[str, Any] | None, *, error: bool = False) -> ToolResult:
        return ToolResult(tool_use_id="t", content="done", is_error=error, name=op, input=args)

    def event(op: TaskOpName, args: dict[str, Any], taskid: int) -> TaskEvent:
        return TaskEvent(op=op, input=args, taskid=taskid)

    times = [AT + timedelta(minutes=i) for i in range(8)]
    await _append(
        database,
        [
            (user_text("plan it"), times[0]),
            (result("TaskCreate", {"subject": "a"}), times[1]),
            (event("TaskUpdate", {"taskid": 1, "status": "inprogress"}, 1), times[2]),
            (result("TaskCreate", {"subject": "b"}), times[3]),
            (result("TaskUpdate", {"taskid": 9, "status": "completed"}, error=True), times[4]),
            (result("TaskUpdate", None), times[5]),  # no recorded input: nothing to replay
            (
                ToolResult(
                    tool_use_id="t",
                    content=[TextBlock(text="done")],  # blocks: read through the model
                    name="TaskUpdate",
                    input={"taskid": 2, "subject": "b2"},
                ),
                times[6],
            ),
            (event("TaskCreate", {"subject": "c"}, 3), times[7]),
        ],
    )

    async with database.read() as session:
        ops = await task_ops(session, "ses_tasks")
        store = await load_store(session, "ses_tasks")

    assert ops == [
        TaskOp("TaskCreate", {"subject": "a"}, times[1]),
        TaskOp("TaskUpdate", {"taskid": 1, "status": "inprogress"}, times[2]),
        TaskOp("TaskCreate", {"subject": "b"}, times[3]),
        TaskOp("TaskUpdate", {"taskid": 2, "subject": "b2"}, times[6]),
        TaskOp("TaskCreate", {"subject": "c"}, times[7]),
    ]
    assert [(t.taskid, t.status, t.subject, t.updated_at) for t in store.all()] == [
        (1, "inprogress", "a", times[2]),
        (2, "pending", "b2", times[6]),
        (3, "pending", "c", times[7]),
    ]


@pytest.mark.sqlite_only
async def test_a_payload_the_stdlib_wrote_with_nan_is_still_read(database: Database) -> None:
    """The JSON column is written by the stdlib encoder, which writes NaN; orjson refuses it."""
    await _append(
        database,
        [
            (
                ToolResult(
                    tool_use_id="t", content="ok", name="TaskCreate", input={"subject": "a"}
                ),
                AT,
            )
        ],
    )

    async def corrupt(session: AsyncSession) -> None:
        await session.exec(  # type: ignore[call-overload]
            text("UPDATE items SET payload = json_set(payload, '$.input.description', 'x')")
        )
        await session.exec(  # type: ignore[call-overload]
            text("UPDATE items SET payload = replace(payload, '\"x\"', 'NaN')")
        )

    await database.write(corrupt)
    async with database.read() as session:
        [op] = await task_ops(session, "ses_tasks")
    assert op.name == "TaskCreate" and op.args["subject"] == "a"
    assert op.args["description"] != op.args["description"]  # NaN, as the stdlib reads it
