"""Replay and look-ups: how Strata's derived state scales with the history it is derived from.

Two kinds of derived state are measured, each against a database built for the purpose:

- the TaskStore, which has no table: every read replays the session's TaskCreate /
  TaskUpdate results and REST task events from the log (`app.services.tasks.load_store`);
- the memory block and the detail look-up by time, which read the `memory_turns` of a
  session's predecessor chain (`app.services.memory`).

What is timed is the service call in a fresh unit of work (`Database.session`), exactly
as a request runs it. Filling the databases is not timed: it goes through the driver's
`executemany`, with every value in the form SQLAlchemy itself would bind (checked on the
first row of each table), and the payloads are the shapes `dump_payload` writes (checked
by a round trip through the item models on a sample).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Boolean, Engine, Table, create_engine, literal
from sqlmodel import Session as OrmSession
from sqlmodel import SQLModel, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database, sync_url
from app.db.migrate import upgrade_to_head
from app.db.models import Session
from app.db.types import JSONType, UTCDateTime
from app.domain.items import dump_payload, load_payload
from app.domain.tasks import replay
from app.memory.render import clock
from app.memory.timeref import second_of_day
from app.services import memory
from app.services.tasks import checkpoint_of, keep_checkpoint, load_store, rebuild, task_ops
from app.settings import Settings
from bench.common import Context, Row, Section, Stats

NAME = "replay"
TITLE = "Replay and look-ups"
TARGET = (
    "TaskStore rebuild at 100k log items < 0.5 s; detail by time and memory-block "
    "rendering with 1M stored turns < 10 ms median."
)
TENANT = "bench"
REBUILD_TARGET_MS = 500.0
LOOKUP_TARGET_MS = 10.0
WINDOW = 20  # the default L2 window
ZONE = ZoneInfo("UTC")  # the default display zone
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
TimedCall = Callable[[AsyncSession], Awaitable[object]]
TABLES = SQLModel.metadata.tables


# --- filling databases (not timed) ----------------------------------------------------------
def migrated_database(path: Path) -> tuple[str, Engine]:
    """A fresh SQLite file at head, and a synchronous engine for filling it."""
    url = f"sqlite:///{path}"
    upgrade_to_head(url)
    return url, create_engine(sync_url(url))


def add_sessions(engine: Engine, sessions: list[Session]) -> None:
    """A handful of sessions, through the ORM (their many defaults live on the model)."""
    with OrmSession(engine) as orm:
        orm.add_all(sessions)
        orm.commit()


_last_moment: tuple[datetime | None, str] = (None, "")


def _utc_text(value: datetime) -> str:
    """A moment as SQLAlchemy stores it on SQLite; a row's repeated moment is made once."""
    global _last_moment
    if value is not _last_moment[0]:
        text = value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        _last_moment = (value, text)
    return _last_moment[1]


def _converter(column_type: Any) -> Callable[[Any], Any] | None:
    """How SQLAlchemy binds a column's values on SQLite, without its per-value machinery
    (None: as they are)."""
    if isinstance(column_type, UTCDateTime):
        return _utc_text
    if column_type is JSONType:
        return json.dumps
    if isinstance(column_type, Boolean):
        return int
    return None


def bulk_insert(engine: Engine, table: Table, rows: Iterable[dict[str, Any]]) -> int:
    """Insert rows with the driver's `executemany` in one transaction; returns the count.

    SQLAlchemy's per-value bind processing is most of the filling time, so each column's
    values go through one plain converter; on the first row, every column is checked to
    come out exactly as SQLAlchemy's own processors would bind it.
    """
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return 0
    columns = [(name, _converter(table.c[name].type)) for name in first]
    sql = (
        f"INSERT INTO {table.name} ({', '.join(name for name, _ in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    count = 0
    with engine.begin() as conn:
        for name, convert in columns:
            impl = table.c[name].type.dialect_impl(conn.dialect)
            process: Callable[[Any], Any] | None = impl.bind_processor(conn.dialect)
            expected = process(first[name]) if process else first[name]
            assert expected == (convert(first[name]) if convert else first[name]), name
        batch: list[tuple[Any, ...]] = []
        for row in itertools.chain([first], rows):
            batch.append(tuple([f(row[n]) if f else row[n] for n, f in columns]))
            if len(batch) >= 50_000:
                conn.exec_driver_sql(sql, batch)
                count, batch = count + len(batch), []
        if batch:
            conn.exec_driver_sql(sql, batch)
    return count + len(batch)


def database(url: str) -> Database:
    return Database(Settings(_env_file=None, database_url=url))


# --- the task log ---------------------------------------------------------------------------
@dataclass
class TaskLog:
    """A session's log, item by item, as the agent loop and REST clients append it."""

    session_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    tasks: int = 0
    turn: int = 0

    def append(self, kind: str, payload: dict[str, Any], origin: str, tool: str | None) -> None:
        """One item; every 997th payload is checked to be exactly what `dump_payload` writes."""
        if kind == "user_message":
            self.turn += 1
        seq = len(self.rows) + 1
        if seq % 997 == 1:
            assert dump_payload(load_payload(kind, payload)) == payload, (kind, payload)
        self.rows.append(
            {
                "session_id": self.session_id,
                "seq": seq,
                "turn": self.turn,
                "segment": 0,
                "kind": kind,
                "origin": origin,
                "tool_name": tool,
                "source_id": None,
                "payload": payload,
                "created_at": T0 + timedelta(seconds=seq),
            }
        )

    def task_write(self, n: int) -> None:
        """The n-th task operation: mostly tool calls, 1 in 50 over REST, 1 in 40 refused."""
        args: dict[str, Any]
        if self.tasks == 0 or n % 10 == 0:
            op, args = "TaskCreate", {"subject": f"task {n}", "description": f"step {n} " * 8}
            self.tasks += 1
        else:
            status = ("inprogress", "completed", "pending")[n % 3]
            op, args = "TaskUpdate", {"taskid": 1 + (n * 7) % self.tasks, "status": status}
        if n % 50 == 7:
            self.append("task_event", {"op": op, "input": args, "taskid": 1}, "api", op)
            return
        refused = n % 40 == 3
        # the real result ends with a summary of the whole store; a 10-task one stands in
        content = (
            "task 999 does not exist (TaskList shows every task)"
            if refused
            else f"Updated task {n}:\n[{n}] {args.get('status', 'pending')}: task {n}\n\n"
            f"{self.tasks} tasks: 3 pending, 1 inprogress, 6 completed, 0 deleted\n"
            + "\n".join(f"[{i}] completed: task {i}" for i in range(1, 11))
        )
        result = {
            "tool_use_id": f"toolu_{n:08d}",
            "content": content,
            "is_error": refused,
            "name": op,
            "input": args,
        }
        self.append("tool_result", result, "system", op)

    def chat_turn(self, n: int, items: int) -> None:
        """A prompt, Read calls with their results, then the answer: `items` items."""
        self.append("user_message", _user(f"question {n}: " + "why " * 20), "user", None)
        for k in range(max(0, (items - 2) // 2)):
            call: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n}_{k}", "name": "Read"}
            call["input"] = {"path": f"src/{k}.py"}
            self.append("assistant_message", _assistant("Let me look.", call), "llm", None)
            result = {
                "tool_use_id": call["id"],
                "content": "def f():\n    return 1\n" * 20,
                "is_error": False,
                "name": "Read",
                "input": None,
            }
            self.append("tool_result", result, "system", "Read")
        self.append("assistant_message", _assistant(f"answer {n}: " + "because " * 40), "llm", None)


def _user(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _assistant(text: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    usage = {
        "input_tokens": 1200,
        "output_tokens": 80,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    return {
        "content": [{"type": "text", "text": text}, *blocks],
        "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use" if blocks else "end_turn",
        "usage": usage,
    }


def mixed_log(session_id: str, size: int, task_share: float) -> list[dict[str, Any]]:
    """`size` items of chat turns (10 items each) with task operations interleaved."""
    log = TaskLog(session_id)
    ops = 0
    while len(log.rows) < size:
        log.chat_turn(log.turn + 1, items=10)
        while ops < task_share * len(log.rows) and len(log.rows) < size:
            ops += 1
            log.task_write(ops)
    return log.rows[:size]


def task_only_log(session_id: str, size: int) -> list[dict[str, Any]]:
    log = TaskLog(session_id)
    for n in range(1, size + 1):
        log.task_write(n)
    return log.rows


# --- the memory tables ----------------------------------------------------------------------
@dataclass(frozen=True)
class Chain:
    """Sessions continuing each other, and the one that would start next (it has no turns)."""

    name: str
    sessions: list[str]
    turns_each: int
    start: datetime
    step: timedelta

    @property
    def head(self) -> str:
        return f"{self.name}_next"

    @property
    def turns(self) -> int:
        return len(self.sessions) * self.turns_each

    def ended_at(self, index: int) -> datetime:
        return self.start + index * self.step

    def session_rows(self) -> list[Session]:
        previous: str | None = None
        rows = []
        for session_id in [*self.sessions, self.head]:
            rows.append(Session(id=session_id, tenant=TENANT, continues_from=previous))
            previous = session_id
        return rows


def chain(name: str, sessions: int, turns_each: int, start: datetime, step_s: int) -> Chain:
    ids = [f"{name}_{i:02d}" for i in range(1, sessions + 1)]
    return Chain(name, ids, turns_each, start, timedelta(seconds=step_s))


def turn_rows(c: Chain, first_id: int, window: int) -> Iterator[dict[str, Any]]:
    """The chain's turns; every turn older than its last `window` has its L1, as once the
    summary job has caught up. Ids are assigned here so details can point at them."""
    summarized = c.turns - window
    for index in range(c.turns):
        session_id = c.sessions[index // c.turns_each]
        t = index % c.turns_each
        at = c.ended_at(index)
        yield {
            "id": first_id + index,
            "session_id": session_id,
            "origin_session_id": session_id,
            "turn": t + 1,
            "ended_at": at,
            "ended_second": second_of_day(at),
            "user_text": f"question {index}: how does the parser treat line {t}?",
            "assistant_text": f"answer {index}: " + "it splits on commas; " * 10,
            "l1": f"asked about line {t}; parser splits on commas" if index < summarized else None,
            "l1_fallback": False,
            "created_at": at,
            "updated_at": at,
        }


def detail_rows(c: Chain, first_id: int, every: int) -> Iterator[dict[str, Any]]:
    """A tool input and its output (L3) for every `every`-th turn of the chain."""
    code = "def parse(line):\n    return line.split(',')\n" * 4
    for index in range(0, c.turns, every):
        turn_id = first_id + index
        session_id = c.sessions[index // c.turns_each]
        for kind, body in (("tool_input", '{"path": "parser.py"}'), ("tool_output", code)):
            yield {
                "turn_id": turn_id,
                "origin_session_id": session_id,
                "kind": kind,
                "source_id": f"toolu_{turn_id}:{kind}",
                "tool_name": "Read",
                "text": body,
            }


# --- timing ---------------------------------------------------------------------------------
async def _timed(db: Database, call: TimedCall) -> float:
    start = time.perf_counter()
    async with db.read() as session:
        await call(session)
    return (time.perf_counter() - start) * 1000.0


async def _calls(db: Database, n: int, call: TimedCall, *, warm: bool = True) -> Stats:
    """`n` timed calls, after one untimed call that warms pool, statement and page caches."""
    if warm:
        await _timed(db, call)
    return Stats.of([await _timed(db, call) for _ in range(n)], "ms")


def _row(label: str, stats: Stats, target: float | None, **data: Any) -> Row:
    met = None if target is None else stats.median < target
    return Row(label, {"median (min–max)": stats.cell(1)}, met, {"stats": stats.as_dict(), **data})


# --- the TaskStore --------------------------------------------------------------------------
def _rebuild(session_id: str) -> TimedCall:
    return lambda s: load_store(s, session_id)


async def task_rows(ctx: Context) -> tuple[list[Row], list[str]]:
    size = ctx.scale(100_000, 10_000)
    task_share = 0.05
    url, engine = migrated_database(ctx.workdir / "tasks.db")
    add_sessions(
        engine, [Session(id="ses_mix", tenant=TENANT), Session(id="ses_ops", tenant=TENANT)]
    )
    every = Settings(_env_file=None).task_checkpoint_ops
    started = time.perf_counter()
    bulk_insert(engine, TABLES["items"], mixed_log("ses_mix", size, task_share))
    ops_log = task_only_log("ses_ops", size)
    bulk_insert(engine, TABLES["items"], ops_log[:-every])
    fill_s = time.perf_counter() - started

    db = database(url)
    try:
        # the checkpoint a write leaves, then as many operations after it as may follow
        # one before the next write leaves another: the longest rebuild there is
        async def checkpoint(session: AsyncSession) -> None:
            rebuilt = await rebuild(session, "ses_ops")
            due = checkpoint_of(rebuilt, 0)
            assert due is not None
            await keep_checkpoint(session, "ses_ops", due)

        await db.write(checkpoint)
        bulk_insert(engine, TABLES["items"], ops_log[-every:])
        engine.dispose()
        async with db.read() as session:
            mixed_ops = len(await task_ops(session, "ses_mix"))
            all_ops = await task_ops(session, "ses_ops")
        mix = await _calls(db, ctx.runs, _rebuild("ses_mix"))
        from_checkpoint = await _calls(db, ctx.runs, _rebuild("ses_ops"), warm=False)
    finally:
        await db.dispose()
    tasks = len(replay(all_ops).all())

    def in_memory() -> float:
        start = time.perf_counter()
        replay(all_ops)
        return (time.perf_counter() - start) * 1000.0

    pure = Stats.of([in_memory() for _ in range(ctx.runs)], "ms")
    k = f"{size // 1000}k"
    rows = [
        _row(
            f"TaskStore rebuild from the DB: {k} items, {mixed_ops:,} of them task ops",
            mix,
            REBUILD_TARGET_MS,
            items=size,
            task_ops=mixed_ops,
        ),
        _row(
            f"TaskStore rebuild from the DB: {k} items, all task ops, {every:,} of them "
            "after the checkpoint (worst case)",
            from_checkpoint,
            REBUILD_TARGET_MS,
            items=size,
            task_ops=len(all_ops),
            tasks=tasks,
            after_checkpoint=every,
        ),
        _row(
            f"for scale: `replay()` of all {len(all_ops):,} ops in memory, no checkpoint",
            pure,
            None,
        ),
    ]
    notes = [
        f"**TaskStore.** Two sessions of {size:,} log items each, in one SQLite database. The "
        f"first is chat turns of 10 items (a prompt, Read calls and their results, an answer) "
        f"with task operations interleaved at {task_share:.0%} of the items. In the second "
        f"every item is a task operation ({tasks:,} tasks created, the rest updates; 1 in 50 "
        f"a REST task event, 1 in 40 a refused call that replay skips). A rebuild is "
        f"`load_store` in a fresh unit of work: the indexed read of the task items "
        f"(`ix_items_session_tool`), parsing, `replay`. Each figure is {ctx.runs} rebuilds; "
        f"filling the database took {fill_s:.0f} s (not timed).",
        f"**Checkpoints.** A write whose rebuild replayed more than "
        f"`STRATA_TASK_CHECKPOINT_OPS` ({every:,}) operations leaves a checkpoint (the store "
        f"as of that point of the log), and a rebuild reads it and replays what follows: at "
        f"most about {every:,} operations, however long the log. The worst case is measured "
        f"with a checkpoint {every:,} operations before the end. Without checkpoints (the "
        f"first rebuild of a log no write of Strata's has checkpointed yet) a rebuild replays "
        f"everything: `replay()` alone then takes the last row's time (every operation "
        f"validated by its pydantic model, an update copying the task: "
        f"~{pure.median * 1000 / max(len(all_ops), 1):.0f} µs per operation), plus reading "
        f"and parsing the rows, about twice as much again.",
    ]
    return rows, notes


# --- memory ---------------------------------------------------------------------------------
LIMITS = memory.BlockLimits(WINDOW, 9_500, 0.7)  # the defaults (STRATA_MEMORY_BLOCK_*)


def _block(session_id: str) -> TimedCall:
    return lambda s: memory.memory_block(s, TENANT, session_id, limits=LIMITS, tz=ZONE)


def _detail(session_id: str, reference: str) -> TimedCall:
    return lambda s: memory.detail(s, TENANT, session_id, reference, tz=ZONE)


async def memory_rows(ctx: Context) -> tuple[list[Row], list[str]]:
    total = ctx.scale(1_000_000, 10_000)
    small = chain("ses_small", 2, 100, datetime(2026, 6, 1, 9, 0, tzinfo=UTC), 83)
    big = chain("ses_big", 10, (total - small.turns) // 10, T0, 47)
    url, engine = migrated_database(ctx.workdir / "memory.db")
    add_sessions(engine, big.session_rows() + small.session_rows())
    started = time.perf_counter()
    for c, first_id, every in ((big, 1, 10), (small, big.turns + 1, 1)):
        bulk_insert(engine, TABLES["memory_turns"], turn_rows(c, first_id, WINDOW))
        bulk_insert(engine, TABLES["memory_details"], detail_rows(c, first_id, every))
    fill_s = time.perf_counter() - started
    engine.dispose()

    calls = max(20, ctx.runs * 10)
    small_time = clock(small.ended_at(small.turns - 1), ZONE)
    big_time = clock(big.ended_at(big.turns - 1), ZONE)
    lookups = [
        (f"memory block, {small.turns}-turn chain", _block(small.head)),
        (f"detail `{small_time}`, {small.turns}-turn chain", _detail(small.head, small_time)),
        (f"detail `{big_time}`, {big.turns:,}-turn chain", _detail(big.head, big_time)),
        (
            f"detail `{big_time[:5]}` (a whole minute), {big.turns:,}-turn chain",
            _detail(big.head, big_time[:5]),
        ),
        (f"memory block, {big.turns:,}-turn chain", _block(big.head)),
    ]
    db = database(url)
    try:
        floor = await _calls(db, calls, lambda s: s.exec(select(literal(1))))
        rows = [
            _row(label, await _calls(db, calls, call), LOOKUP_TARGET_MS, calls=calls)
            for label, call in lookups
        ]
        async with db.read() as session:
            block = await memory.memory_block(session, TENANT, big.head, limits=LIMITS, tz=ZONE)
    finally:
        await db.dispose()
    rows[len(lookups) - 1].data["block_chars"] = len(block.text)
    rows[len(lookups) - 1].data["counts"] = vars(block.counts)
    rows.insert(0, _row("for scale: a unit of work running one `SELECT 1`", floor, None))
    days = (big.ended_at(big.turns) - big.start).days
    notes = [
        f"**Memory.** One SQLite database of {total:,} memory turns: a chain of "
        f"{len(big.sessions)} sessions holding {big.turns:,} turns (one every "
        f"{big.step.seconds} s, {days} days; L3 details on every 10th turn) and a chain of "
        f"{len(small.sessions)} sessions with {small.turns} turns (a long but ordinary "
        f"history, L3 on every turn). Each look-up is asked of the session that continues "
        f"the chain; each figure is {calls} calls after a warm-up. Filling took "
        f"{fill_s:.0f} s (not timed). The `SELECT 1` row is the floor of any look-up here: "
        f"a unit of work and one round trip through SQLAlchemy and aiosqlite's thread. The "
        f"block of the {small.turns}-turn chain costs three such queries (the session, its "
        f"chain, its turns) plus rendering; a detail look-up four (the spans, the turns, "
        f"their L3).",
        "**Detail by time.** A time of day matches on every day (seed 003). Each turn "
        "stores the second of the UTC day it ended in (`ended_second`, indexed per "
        "session), so the look-up reads one index range per UTC offset the display zone "
        "has in the chain's span (one or two; it matches exactly in Python afterwards), "
        f"where it read one range of `ended_at` per day ({days} for the long chain). "
        "A turn is matched by the span it covers (prompt to end): the one running across "
        "the time, without ending in it, is found by one probe of the `(session_id, "
        "ended_at)` index per session and day, all in one statement (the probes one "
        "parameter, `json_each`), which returns only a probed turn that began by then. The "
        "seeded turns keep no start (as turns projected before it was kept), so here the "
        "probes run and find none. "
        "The chain itself is loaded with one recursive query. What is left is the answer "
        f"itself: a whole minute matches on about every day, here "
        f"~{days * 60 // big.step.seconds:,} turns, each read with its L3.",
        f"**Memory block of a {big.turns:,}-turn chain.** The block has a budget "
        f"(`STRATA_MEMORY_BLOCK_MAX_CHARS`, {LIMITS.max_chars:,} characters, under Claude "
        f"Code's 10,000-character inline limit): it shows the newest {WINDOW} turns whole "
        f"and as many older L1 lines as fit ({block.counts.l1_turns:,} here), and counts "
        f"the {block.counts.omitted_turns:,} it leaves out from the sessions' turn numbers "
        "(index probes per session). It reads the turns newest first, one index range "
        "per session merged lazily and only while there is room, with texts cut in SQL to "
        f"what it could show: {len(block.text):,} characters, whatever the chain's length "
        "(before the budget, the block of this chain was 58.9 million characters and took "
        "15.6 s).",
    ]
    return rows, notes


async def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, TARGET)
    for part in (task_rows, memory_rows):
        rows, notes = await part(ctx)
        section.rows += rows
        section.notes += notes
    return section
