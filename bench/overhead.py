"""Step overhead: Strata's own work between two LLM requests of one turn.

Timed from the fake Messages API's side: the gap between an answer written and the
next request arrived. That gap holds the client's whole step: reading and parsing the
streamed answer (SDK), persisting it, running the tool and persisting its result,
reading the segment back, building the request, the interceptors, and the SDK
sending the next request. The same gap is measured in the same run for a bare
`AsyncAnthropic` streaming loop (tool_use → tool_result → next request) sending what
Strata sent first (same system prompt, history and tools) to the same fake: the
difference is Strata's own work per step, and nothing of the SDK, the loopback or
the fake is in it. Both loops run in this process, one after the other.

The fake runs in a process of its own (`bench.fake_llm`) and answers at once with one
more tool call (`current_time`, a builtin tool that only reads, so each step is logged in
one transaction), so a turn keeps making requests. Three sessions whose current
segment holds 200 items: a fresh one (those 200 items are its whole log), one whose log
holds 10,000 items, and one whose log holds 10,000 task operations (the task list is
rebuilt from the log). They differ only in what lies before the segment: a step that
reads the whole log grows with it, and the target asks it to stay within 10% of the
fresh session's. A fourth, fresh session of 100 items is there for scale: a step's
work also grows with the conversation it sends (the SDK's, and Strata's).

The transactions, statements and thread hand-offs of a step and of a one-request
chat turn are counted in process (`Database.stats` plus aiosqlite's hand-offs,
`bench.common.HandoffCounter`); they do not depend on load.
"""

from __future__ import annotations

import copy
import datetime as dt
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import anthropic
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.ids import new_id
from app.engine.anthropic import AnthropicLLM, wire_params
from app.engine.llm import LLMRequest, LLMResponse, TextSink
from app.services.chat import IfBusy, send_message
from app.services.live import LiveHub
from app.settings import Settings
from app.wiring import builtin_tools, piece_catalog
from app.worker.runner import Runner
from bench import fake_llm
from bench.common import (
    Context,
    DbCounts,
    HandoffCounter,
    Row,
    Section,
    Stats,
    db_counts,
    step_gaps_ms,
)
from bench.seed import TENANT, session_with_log

T = TypeVar("T")
SEGMENT = 200
REQUESTS_PER_TURN = 12
TARGET_MS = 2.0
FLAT_WITHIN = 0.10
TOOL = "current_time"
SCALE_ITEMS = 100
RUNS_FACTOR = 3
"""Runs per figure here, as a multiple of the report's: a run's median gap moves by
~0.1 ms from run to run, the size of the difference the target bounds (10% of ~1.2 ms),
and a run takes under a second."""


class CountingLLM:
    """The real SDK client; notes the database counts and this process's CPU time as
    each request starts, and what Strata asked first (for the bare loop to send the
    same)."""

    def __init__(self, inner: AnthropicLLM, database: Database) -> None:
        self.inner = inner
        self.database = database
        self.at_request: list[DbCounts] = []
        self.cpu_at_request: list[float] = []
        self.first: dict[str, Any] | None = None

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        self.at_request.append(db_counts(self.database.stats))
        self.cpu_at_request.append(time.process_time())
        if self.first is None:
            self.first = copy.deepcopy(wire_params(request))
        return await self.inner.complete(request, on_text)

    def per_step(self) -> DbCounts:
        """The counts between the first request and the last, summed (steps = requests - 1)."""
        return self.at_request[-1] - self.at_request[0]


def _settings(url: str, database_url: str, data_dir: Path) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "data_dir": data_dir,
        "anthropic_base_url": url,
        "anthropic_api_key": "bench",
        "llm_max_retries": 0,
        "agent_max_iterations": REQUESTS_PER_TURN,
    }
    return Settings(_env_file=None, **values)


async def strata_turn(
    settings: Settings, session_id: str, message: str
) -> tuple[CountingLLM, DbCounts]:
    """One chat turn as the worker runs it, to its end; the LLM wrapper and the turn's
    counts (from the job's claim on: not the write that queued it, nor the claim)."""
    database = Database(settings)
    llm = CountingLLM(AnthropicLLM(settings), database)
    tools = builtin_tools(settings)
    runner = Runner(settings, database, llm, tools, LiveHub(), piece_catalog(settings, tools))
    try:

        async def queued(db: AsyncSession) -> Job:
            return await send_message(db, TENANT, session_id, message, IfBusy.reject)

        async def claimed(db: AsyncSession) -> list[Job]:
            until = utcnow() + timedelta(hours=1)
            return await JobRepository(db).claim(new_id("w"), until, limit=1)

        await database.write(queued)
        (job,) = await database.write_statements(claimed)
        before = db_counts(database.stats)
        await runner.run_claimed(job)
        turn = db_counts(database.stats) - before
    finally:
        await llm.inner.close()
        await database.dispose()
    return llm, turn


async def bare_turn(base_url: str, params: dict[str, Any], requests: int) -> None:
    """The yardstick: what any agent loop on the SDK does between two requests, and
    nothing more. Streams each answer as Strata does, answers each tool call with the
    current time, sends the grown conversation."""
    params = copy.deepcopy(params)
    messages: list[dict[str, Any]] = params["messages"]
    async with anthropic.AsyncAnthropic(
        api_key="bench", base_url=base_url, max_retries=0
    ) as client:
        for _ in range(requests):
            async with client.messages.stream(**params) as stream:
                async for _event in stream:
                    pass
                message = await stream.get_final_message()
            calls = [block for block in message.content if block.type == "tool_use"]
            if not calls:
                return
            content = [block.model_dump(exclude_none=True) for block in message.content]
            messages.append({"role": "assistant", "content": content})
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            results = [{"type": "tool_result", "tool_use_id": c.id, "content": now} for c in calls]
            messages.append({"role": "user", "content": results})


async def _template(workdir: Path, name: str, items: int, task_ops: int) -> tuple[Path, str]:
    path = workdir / f"{name}.db"
    url = f"sqlite:///{path}"
    upgrade_to_head(url)
    database = Database(Settings(_env_file=None, database_url=url, data_dir=workdir))
    try:
        session_id = await session_with_log(database, items, SEGMENT, task_ops)
    finally:
        await database.dispose()
    return path, session_id


def _median(values: list[float]) -> float:
    return Stats.of(values, "ms").median


@dataclass
class _Condition:
    """A session to measure, and what its runs gave."""

    label: str
    template: Path
    session_id: str
    strata: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    steps: DbCounts = field(default_factory=DbCounts)
    turn: DbCounts = field(default_factory=DbCounts)

    def figures(self) -> dict[str, Any]:
        strata, bare = self.strata, self.bare
        return {
            "strata": Stats.of(strata, "ms"),
            "bare": Stats.of(bare, "ms"),
            "own": Stats.of([s - b for s, b in zip(strata, bare, strict=True)], "ms"),
            "ratio": Stats.of([s / b for s, b in zip(strata, bare, strict=True)], "×"),
            "steps": self.steps,
            "turn": self.turn,
        }


def in_turns(conditions: Sequence[T], runs: int) -> Iterator[tuple[int, T]]:
    """(run number, condition): the conditions take turns run by run. The machine's speed
    drifts over minutes; a condition measured in a block of its own would carry that
    drift, which can be as large as the difference the target bounds."""
    for run_no in range(runs):
        for condition in conditions:
            yield run_no, condition


async def _run_once(
    fake: fake_llm.FakeLLM, ctx: Context, condition: _Condition, *, count_turn: bool
) -> None:
    """One pair of turns on a fresh copy of the condition's database, Strata's then the
    bare loop's; with `count_turn`, then the counts of a one-request turn (they do not
    vary between runs: one is enough)."""
    db = ctx.workdir / "run.db"
    shutil.copyfile(condition.template, db)
    settings = _settings(fake.url, f"sqlite:///{db}", ctx.workdir / "data")
    fake.take_exchanges()
    llm, _ = await strata_turn(settings, condition.session_id, "Go on.")
    condition.strata.append(_median(step_gaps_ms(fake.take_exchanges())))
    condition.steps = llm.per_step()
    assert llm.first is not None
    await bare_turn(fake.url, llm.first, REQUESTS_PER_TURN)
    condition.bare.append(_median(step_gaps_ms(fake.take_exchanges())))
    if count_turn:
        shutil.copyfile(condition.template, db)  # the turn above left its job to the runner
        _, condition.turn = await strata_turn(settings, condition.session_id, fake_llm.ONE_REQUEST)
        fake.take_exchanges()
    db.unlink()


async def run(ctx: Context) -> Section:
    HandoffCounter.install()
    section = Section(
        name="overhead",
        title="Step overhead: Strata's work between two LLM requests of a turn",
        target=(
            f"Strata's step gap minus a bare SDK loop's ≤ {TARGET_MS:g} ms (median), and "
            f"within {FLAT_WITHIN:.0%} of the fresh session's after 10,000 log items and "
            "after 10,000 task operations (SQLite; gaps seen by the fake LLM)"
        ),
    )
    task_ops = ctx.scale(10_000, 2_000)
    long_log = ctx.scale(10_000, 2_000)
    # the fresh session's segment is as long as the others' (the whole of its log), so
    # the rows differ only in what lies before it; the last row, a shorter segment, is
    # for scale (the step's own work also grows with the conversation it sends)
    conditions = [
        (f"fresh session ({SEGMENT} items)", SEGMENT, 0),
        (f"{long_log:,} log items", long_log, 0),
        (f"{task_ops:,} task operations", SEGMENT, task_ops),
        (f"for scale: fresh session of {SCALE_ITEMS} items (a shorter segment)", SCALE_ITEMS, 0),
    ]
    started = time.monotonic()
    measured = [
        _Condition(label, *await _template(ctx.workdir, f"t{index}", items, ops))
        for index, (label, items, ops) in enumerate(conditions)
    ]
    with fake_llm.running(delay=0.0, tool=TOOL) as fake:
        # warm-up: imports, statement caches, the fake's first answers
        first = measured[0]
        warm = _Condition(first.label, first.template, first.session_id)
        await _run_once(fake, ctx, warm, count_turn=False)
        for run_no, condition in in_turns(measured, RUNS_FACTOR * ctx.runs):
            await _run_once(fake, ctx, condition, count_turn=run_no == 0)
    for condition in measured:
        condition.template.unlink()
    results = [(condition.label, condition.figures()) for condition in measured]
    fresh = results[0][1]["own"].median
    steps = REQUESTS_PER_TURN - 1
    for index, (label, r) in enumerate(results):
        own: Stats = r["own"]
        flat = index == 0 or abs(own.median - fresh) <= FLAT_WITHIN * abs(fresh)
        for_scale = index == len(conditions) - 1
        section.rows.append(
            Row(
                label=label,
                cells={
                    "Strata's step gap": r["strata"].cell(),
                    "bare SDK loop's": r["bare"].cell(),
                    "step overhead (difference)": own.cell(),
                    "ratio": r["ratio"].cell(2),
                    "vs fresh": "—" if index == 0 else f"{own.median - fresh:+.2f} ms",
                    "per step": r["steps"].cell(steps),
                    "per one-request turn": r["turn"].cell(),
                },
                meets=None if for_scale else own.median <= TARGET_MS and flat,
                data={
                    "strata_gap": r["strata"].as_dict(),
                    "bare_gap": r["bare"].as_dict(),
                    "overhead": own.as_dict(),
                    "ratio": r["ratio"].as_dict(),
                    "per_step": r["steps"].as_dict(steps),
                    "per_one_request_turn": r["turn"].as_dict(),
                },
            )
        )
    section.notes.append(
        f"{RUNS_FACTOR * ctx.runs} runs per row ({RUNS_FACTOR}× the report's runs per "
        "figure: a run's median gap moves by ~0.1 ms from run to run, the size of the "
        "difference the target bounds). "
        f"Each run is one chat turn of {REQUESTS_PER_TURN} requests on a fresh copy of the "
        f"database, then the bare loop's turn of {REQUESTS_PER_TURN} requests; a run's "
        f"figure is the median of its {steps} gaps, and a cell gives the median (min–max) "
        "of the runs, the difference and ratio taken run by run. The sessions take turns run "
        "by run (the machine's speed drifts over minutes: measured in blocks of their own, "
        "two sessions differed by as much as the 10% bound). Before the first run, one "
        "turn of each loop is run and discarded (warm-up)."
    )
    section.notes.append(
        "**Counts** (in process, not load-dependent): per step, from one request's start "
        f"to the next's, averaged over the turn's {steps} steps; per one-request turn, "
        f"a turn the fake answers without a tool call (message `{fake_llm.ONE_REQUEST}`), "
        "from the job's claim on to its end, as the runner runs it (the writes that "
        "queued and claimed it are two more transactions). Hand-offs: 2 per write unit "
        "on the writer thread (there and back), 2 per aiosqlite call on the event loop "
        "(each runs on the connection's thread)."
    )
    section.notes.append(f"This section took {time.monotonic() - started:.0f} s.")
    shutil.rmtree(ctx.workdir / "data", ignore_errors=True)
    return section
