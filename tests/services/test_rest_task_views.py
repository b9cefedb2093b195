"""A REST task write works on the session's view (`app.services.session_view`) and gives
it back once it committed, so the next REST write of the session in this process reads
and replays nothing while the log still ends at its item. Whatever else happened in
between, it reads the task items after the view's end, and every answer is what
replaying the log gives. A REST task read answers from a view the log still ends at.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import TaskCheckpoint
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import NotFound
from app.domain.items import Origin, ToolResult
from app.domain.tasks import Task, replay
from app.services.events import record_event
from app.services.items import append_item
from app.services.tasks import change_task, list_tasks, task_ops
from tests.support.databases import database_with

SESSION = "ses_kept"


class Refused(Exception):
    """A unit of work that fails after its task write."""


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


async def rest(database: Database, op: str, args: dict[str, Any], *, every: int = 1000) -> Task:
    return await database.write(
        lambda db: change_task(db, "t", SESSION, op, args, checkpoint_every=every)
    )


async def agent_creates(database: Database, subject: str) -> None:
    """A TaskCreate by the agent's tool, as its tool batch records it."""
    result = ToolResult(
        tool_use_id="toolu_1", content="ok", name="TaskCreate", input={"subject": subject}
    )
    await database.write(lambda db: append_item(db, SESSION, result, Origin.system))


async def replayed(database: Database) -> list[Task]:
    async with database.read() as db:
        return replay(await task_ops(db, SESSION)).all()


async def statements_of(database: Database, unit: object) -> int:
    before = database.stats.snapshot()
    await unit  # type: ignore[misc]
    return database.stats.since(before).statements


async def one_statement(db: AsyncSession) -> None:
    await record_event(db, SESSION, "item.appended", {})


async def test_a_rest_task_write_right_after_another_reads_no_task_items(
    database: Database,
) -> None:
    """Rebuilt: the seq allocation (the session's check and row lock), the checkpoint and
    task items in one read, the item, its two events in one. Kept: the read goes. Counted
    against a unit of one statement, since SQLite's count has a BEGIN and PostgreSQL's not."""
    await rest(database, "TaskCreate", {"subject": "the first reads the subscriptions"})
    one = await statements_of(database, database.write(one_statement))
    await agent_creates(database, "the agent's")

    rebuilt = await statements_of(database, rest(database, "TaskCreate", {"subject": "a"}))
    kept = await statements_of(database, rest(database, "TaskCreate", {"subject": "b"}))

    assert (rebuilt, kept) == (one + 3, one + 2)


async def test_a_task_the_agent_created_in_between_is_seen_by_the_next_rest_write(
    database: Database,
) -> None:
    await rest(database, "TaskCreate", {"subject": "by REST"})
    await agent_creates(database, "by the agent")

    task = await rest(database, "TaskUpdate", {"taskid": 2, "status": "inprogress"})

    assert (task.subject, task.status) == ("by the agent", "inprogress")
    assert (await replayed(database))[1] == task


async def test_a_write_that_rolled_back_leaves_no_task_list_behind(database: Database) -> None:
    """Its `seq` is handed out again: a list kept from it would be taken for the log's."""
    await rest(database, "TaskCreate", {"subject": "kept"})

    async def create_then_fail(db: AsyncSession) -> None:
        await change_task(
            db, "t", SESSION, "TaskCreate", {"subject": "rolled back"}, checkpoint_every=1000
        )
        raise Refused

    with pytest.raises(Refused):
        await database.write(create_then_fail)
    await agent_creates(database, "the agent's, at the same seq")
    task = await rest(database, "TaskUpdate", {"taskid": 2, "status": "completed"})

    assert task.subject == "the agent's, at the same seq"
    assert [t.subject for t in await replayed(database)] == ["kept", task.subject]


async def test_rest_writes_answer_what_replaying_the_log_gives(database: Database) -> None:
    """Timestamps included, through refused writes (which take the list and roll back)."""
    answers: dict[int, Task] = {}
    for n in range(12):
        if n % 4 == 3:
            with pytest.raises(NotFound):
                await rest(database, "TaskUpdate", {"taskid": 99, "status": "completed"})
            continue
        op, args = (
            ("TaskCreate", {"subject": f"task {n}", "description": f"step {n}"})
            if n % 2 == 0
            else ("TaskUpdate", {"taskid": n // 2 + 1, "status": "inprogress"})
        )
        task = await rest(database, op, args)
        answers[task.taskid] = task

        assert await replayed(database) == [answers[t] for t in sorted(answers)]


async def test_writes_from_a_kept_list_still_leave_checkpoints(database: Database) -> None:
    """So a process that starts later replays no more than `task_checkpoint_ops` of them."""
    for n in range(7):
        await rest(database, "TaskCreate", {"subject": f"task {n}"}, every=3)

    async with database.read() as db:
        checkpoint = await db.get(TaskCheckpoint, SESSION)
    assert checkpoint is not None and checkpoint.ops == 4


async def test_a_write_holding_nul_answers_what_the_log_stored(database: Database) -> None:
    """PostgreSQL stores U+FFFD for U+0000: the next write's list is the log's, not the
    one that applied the raw text."""
    await rest(database, "TaskCreate", {"subject": "nul \x00 here"})

    task = await rest(database, "TaskUpdate", {"taskid": 1, "status": "inprogress"})

    assert [task] == await replayed(database)


async def test_a_rest_task_write_after_another_writer_reads_only_the_task_items_after_it(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view ends at the first write's item; the agent's write after it is the one
    task item read, and nothing is replayed from the checkpoint."""
    from app.db.repositories.items import ItemRepository

    await rest(database, "TaskCreate", {"subject": "by REST"})
    await agent_creates(database, "by the agent")
    read_after: list[int] = []
    real = ItemRepository.by_tool_names

    async def recorded(self: ItemRepository, session_id: str, names: Any, **kw: Any) -> Any:
        read_after.append(kw["after_seq"])
        return await real(self, session_id, names, **kw)

    monkeypatch.setattr(ItemRepository, "by_tool_names", recorded)
    await rest(database, "TaskCreate", {"subject": "by REST again"})

    assert read_after == [1]


async def test_a_rest_task_list_read_after_a_write_replays_nothing(
    database: Database,
) -> None:
    """The session's row, which says whose it is, says the log still ends at the view's
    end: the list is the view's. Counted against the read that only checks the row."""
    await rest(database, "TaskCreate", {"subject": "listed"})

    async def row_only(db: AsyncSession) -> object:
        return await SessionRepository(db).session_row(SESSION)

    one = await statements_of(database, database.read_unit(row_only))
    listed = await database.read_unit(lambda db: list_tasks(db, "t", SESSION))
    spent = await statements_of(
        database, database.read_unit(lambda db: list_tasks(db, "t", SESSION))
    )

    assert [t.subject for t in listed] == ["listed"]
    assert spent == one


async def test_a_rest_task_list_read_after_another_writer_is_what_replaying_gives(
    database: Database,
) -> None:
    await rest(database, "TaskCreate", {"subject": "by REST"})
    await agent_creates(database, "by the agent")

    async with database.read() as db:
        listed = await list_tasks(db, "t", SESSION)

    assert listed == await replayed(database)
