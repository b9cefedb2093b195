"""Task checkpoints: a rebuild starts from the session's checkpoint and replays only what
follows it, and gives exactly the store that replaying the whole log gives.

Without a checkpoint a rebuild replays every task operation of the log, on every REST
read of the list and at every job's start: seconds at 100,000 of them.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, TaskCheckpoint
from app.db.repositories.task_checkpoints import CheckpointRow, TaskCheckpointRepository
from app.domain.items import (
    AssistantMessage,
    Origin,
    TaskEvent,
    TextBlock,
    ToolResult,
    user_text,
)
from app.domain.jobs import JobKind
from app.domain.tasks import TaskOp, TaskStore, replay
from app.domain.usage import Usage
from app.engine.loop import Answered, Note
from app.services.items import append_item
from app.services.tasks import change_task, rebuild, task_ops
from app.worker.job_session import JobSession
from app.worker.task_gateway import JobTaskGateway
from app.worker.turn_store import DbTurnStore
from tests.support.databases import database_with

SESSION = "ses_ckpt"
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with database_with(database_url, SESSION) as db:
        yield db


def _ops(count: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """Creates and updates, some of them refused (an unknown task, no change at all)."""
    rng = random.Random(seed)
    made = 0
    ops: list[tuple[str, dict[str, Any]]] = []
    for _ in range(count):
        roll = rng.random()
        if made == 0 or roll < 0.3:
            ops.append(("TaskCreate", {"subject": f"task {made + 1}"}))
            made += 1
        elif roll < 0.9:
            status = rng.choice(["pending", "inprogress", "completed", "deleted"])
            ops.append(("TaskUpdate", {"taskid": rng.randint(1, made), "status": status}))
        else:
            ops.append(("TaskUpdate", {"taskid": made + 5, "status": "completed"}))
    return ops


async def _agent_writes(database: Database, ops: list[tuple[str, dict[str, Any]]]) -> None:
    """Task items as the agent's tools leave them: no checkpoint is written here."""

    async def append(db: AsyncSession) -> None:
        for n, (name, args) in enumerate(ops):
            result = ToolResult(tool_use_id=f"t{n}", content="ok", name=name, input=args)
            await append_item(db, SESSION, result, Origin.system, at=AT + timedelta(seconds=n))

    await database.write(append)


async def _rest_write(database: Database, every: int) -> None:
    async def write(db: AsyncSession) -> None:
        await change_task(
            db, "t", SESSION, "TaskCreate", {"subject": "by REST"}, checkpoint_every=every
        )

    await database.write(write)


async def _whole_replay(database: Database) -> TaskStore:
    async with database.read() as db:
        return replay(await task_ops(db, SESSION))


async def _checkpoint(database: Database) -> TaskCheckpoint | None:
    async with database.read() as db:
        return await db.get(TaskCheckpoint, SESSION)


def test_a_snapshot_restores_the_same_store() -> None:
    store = replay(TaskOp(name, args, AT) for name, args in _ops(40, seed=1))
    restored = TaskStore.restore(store.snapshot())

    assert restored == store
    assert restored is not None and restored.snapshot() == store.snapshot()


def test_a_snapshot_of_another_version_or_damaged_is_not_restored() -> None:
    snapshot = replay([]).snapshot()

    assert TaskStore.restore({**snapshot, "version": 999}) is None
    assert TaskStore.restore({**snapshot, "tasks": [{"taskid": "x"}]}) is None
    assert TaskStore.restore({}) is None


async def test_a_write_whose_rebuild_replayed_many_operations_leaves_a_checkpoint(
    database: Database,
) -> None:
    await _agent_writes(database, _ops(30, seed=2))
    assert await _checkpoint(database) is None

    await _rest_write(database, every=10)

    checkpoint = await _checkpoint(database)
    assert checkpoint is not None and checkpoint.ops == 30
    async with database.read() as db:
        rebuilt = await rebuild(db, SESSION)
    assert rebuilt.replayed == 1  # the REST write after the checkpoint, nothing before it
    assert rebuilt.store == await _whole_replay(database)


async def test_a_write_whose_rebuild_replayed_few_operations_leaves_none(
    database: Database,
) -> None:
    await _agent_writes(database, _ops(10, seed=3))

    await _rest_write(database, every=10)

    assert await _checkpoint(database) is None


async def test_rebuilding_from_checkpoints_gives_what_replaying_the_whole_log_gives(
    database: Database,
) -> None:
    for seed in range(6):  # agent writes and REST writes interleaved, checkpoints on the way
        await _agent_writes(database, _ops(7 + seed, seed=10 + seed))
        await _rest_write(database, every=5)
        async with database.read() as db:
            rebuilt = await rebuild(db, SESSION)
        assert rebuilt.store == await _whole_replay(database)
        assert rebuilt.store.snapshot() == (await _whole_replay(database)).snapshot()
        assert rebuilt.replayed <= 1 + 7 + seed


async def test_a_checkpoint_that_cannot_be_read_is_ignored(database: Database) -> None:
    await _agent_writes(database, _ops(20, seed=4))
    await _rest_write(database, every=5)

    async def damage(db: AsyncSession) -> None:
        row = await db.get(TaskCheckpoint, SESSION)
        assert row is not None
        row.state = {"version": 0}
        db.add(row)

    await database.write(damage)
    async with database.read() as db:
        rebuilt = await rebuild(db, SESSION)

    assert rebuilt.replayed == 21  # the whole log again
    assert rebuilt.store == await _whole_replay(database)


async def test_a_rest_task_event_after_the_checkpoint_is_replayed(database: Database) -> None:
    await _agent_writes(database, _ops(12, seed=5))
    await _rest_write(database, every=5)

    async def event(db: AsyncSession) -> None:
        done = TaskEvent(op="TaskUpdate", input={"taskid": 1, "status": "completed"}, taskid=1)
        await append_item(db, SESSION, done, Origin.api)

    await database.write(event)
    async with database.read() as db:
        rebuilt = await rebuild(db, SESSION)

    assert rebuilt.store.get(1).status == "completed"
    assert rebuilt.store == await _whole_replay(database)


async def _job_after_25_task_ops(
    database: Database, *, seed: int, answer_with_end: bool = False
) -> tuple[JobSession, DbTurnStore]:
    """A chat job of a session whose log holds 25 task operations and no checkpoint, with
    its store; checkpoints are due past 10 operations replayed."""
    await _agent_writes(database, _ops(25, seed=seed))
    job = Job(id=f"job_{seed}", tenant="t", session_id=SESSION, kind=JobKind.chat, turn=1)

    async def add(db: AsyncSession) -> None:
        db.add(job)

    await database.write(add)
    held = JobSession(database, job, checkpoint_every=10)
    return held, DbTurnStore(held, answer_with_end=answer_with_end)


async def test_a_job_whose_load_replayed_many_operations_leaves_a_checkpoint_with_its_append(
    database: Database,
) -> None:
    held, store = await _job_after_25_task_ops(database, seed=6)

    await store.segment()  # the job's first look: it loads the task list
    assert await _checkpoint(database) is None  # a read writes nothing
    await store.record(Note(user_text("noted")))

    checkpoint = await _checkpoint(database)
    assert checkpoint is not None and checkpoint.ops == 25
    assert held.checkpoint is None  # written once
    async with database.read() as db:
        assert (await rebuild(db, SESSION)).replayed == 0


async def test_a_checkpoint_is_kept_by_a_statement_unit_and_only_if_it_is_later(
    database: Database,
) -> None:
    async def keep(seq: int) -> int:
        """Keep a checkpoint at `seq`; the statements the keeping took."""

        async def work(db: AsyncSession) -> None:
            before = database.stats.snapshot()
            await TaskCheckpointRepository(db).keep(SESSION, CheckpointRow(seq, seq, {"at": seq}))
            spent.append(database.stats.since(before).statements)

        spent: list[int] = []
        await database.write_statements(work)
        return spent[0]

    assert await keep(10) == 1  # new, older or later alike: one upsert
    assert await keep(5) == 1  # an older one: the session's stays
    kept = await _checkpoint(database)
    assert kept is not None and (kept.seq, kept.state) == (10, {"at": 10})

    assert await keep(12) == 1
    kept = await _checkpoint(database)
    assert kept is not None and (kept.seq, kept.ops, kept.state) == (12, 12, {"at": 12})


async def test_a_turns_answer_carries_a_checkpoint_due_into_the_jobs_end(
    database: Database,
) -> None:
    """The answer that ends a chat turn waits for the job's end (a statement unit), also
    when its write keeps a task checkpoint: the checkpoint is kept by prepared statements
    and commits with the answer in the end's transaction. (Kept through the ORM, it would
    make the answer's write a unit of its own, and the first such write in a process run
    on a connection of its own.)"""
    held, store = await _job_after_25_task_ops(database, seed=7, answer_with_end=True)
    await store.segment()  # loads the task list: a checkpoint is due
    answer = AssistantMessage(content=[TextBlock(text="Done.")])

    await store.record(Answered(answer, Usage(input_tokens=3, output_tokens=1)))
    assert await _checkpoint(database) is None  # nothing written before the end

    async def nothing_else(db: AsyncSession) -> None:
        pass

    await database.write_statements(store.ending(nothing_else))
    store.ended()

    checkpoint = await _checkpoint(database)
    assert checkpoint is not None and checkpoint.ops == 25
    assert held.items[-1] == answer
    assert held.checkpoint is None  # owed no more once the end committed it


async def test_a_task_the_agent_writes_is_held_as_replaying_the_log_gives_it(
    database: Database,
) -> None:
    """The job's own task writes carry the moment their item records: the list it holds
    (and sends to webhooks) has the same timestamps as the one replayed from the log."""
    job = Job(id="job_live", tenant="t", session_id=SESSION, kind=JobKind.chat, turn=1)

    async def add(db: AsyncSession) -> None:
        db.add(job)

    await database.write(add)
    held = JobSession(database, job)
    await DbTurnStore(held).segment()
    gateway = JobTaskGateway(held)

    await gateway.write("toolu_1", "TaskCreate", {"subject": "parse"})
    await gateway.write("toolu_2", "TaskUpdate", {"taskid": 1, "status": "inprogress"})

    async with database.read() as db:
        replayed = (await rebuild(db, SESSION)).store
    assert held.tasks.get(1).created_at is not None
    assert held.tasks.snapshot() == replayed.snapshot()
