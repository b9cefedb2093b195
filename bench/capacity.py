"""Runner capacity: worker CPU per one-request turn, and saturated turns/s, beside a
bare SDK loop's CPU per call.

A `strata worker` process runs a fixed amount of work, TURNS one-request chat turns
(the fake Messages API, in a process of its own, answers each after 200 ms), with
the worker's concurrency at 10, 100 and 1,000. The turns are spread round robin over
as many sessions as the concurrency, and more when a session would otherwise hold more
than SESSION_TURNS of them (a session's turns run one after another): at every level a
turn is then the same work, one request on a short conversation, and none of them ends
past the memory's L2 window, where each turn's end would also queue an L1 summary, an
LLM call of its own, whose CPU would count in the turn's. The
worker is warmed first (a round of turns, not measured). Then the work arrives either
as a burst (one transaction queues it all) or staggered (in batches every 50 ms, at
the rate an ideal runner would finish it: concurrency ÷ 200 ms). The clock runs from
the burst's commit (and so does the workers' CPU count; staggered: from the first
batch) until every turn has ended, however long that takes (up to a generous bound; a
turn not ended by then counts as failed): no fixed window cuts a slow level short.

The headline is the worker process's CPU time per turn (`/proc/<pid>/stat`, over the
measured work), next to a bare asyncio loop on `AsyncAnthropic` driving the same
number of concurrent streaming calls, TURNS in all, against the same fake, right after
Strata's run (its CPU per call, this process's `time.process_time`); a row is the median
of PAIRS such pairs. The bare loop drives its calls as Strata's run got its turns: back
to back after a burst; after a staggered run, arriving as that run's turns did (at most
the concurrency in flight), the same number of concurrent calls. A loop waiting between
arrivals wakes up more often and batches less, Strata's and the bare one alike: a
staggered row also gives the ratio to the bare loop calling back to back (always busy),
the cheapest it gets.
CPU per turn bounds the rate whatever the concurrency: one core runs at most
1000 ÷ (CPU ms per turn) turns/s.

On PostgreSQL, the burst at 100 concurrent runs with one worker process and with
two (each at that concurrency), on fresh databases of the tests' embedded server, taking
turns run by run (PG_RUNS of each); the scale factor is two workers' turns/s over one's,
and two workers' CPU per turn over one's is the target. While they run, `pg_locks` is
sampled for locks not granted (a worker waiting on another's row or transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from sqlalchemy import func, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Job
from app.domain.jobs import TERMINAL, JobKind, JobStatus
from app.engine.anthropic import ClientPools
from app.services.chat import IfBusy, send_message
from app.services.sessions import create_session
from app.settings import Settings
from bench import fake_llm
from bench.common import Context, Row, Section, Stats, cpu_seconds

LLM_SECONDS = 0.2
TENANT = "default"
MAX_CPU_RATIO = 2.0
BOUND_SECONDS = 600.0  # the generous bound on one run's fixed work
STAGGER_EVERY = 0.05
WARM_TURNS = 100
# The fixed work of a run (the target's 2,000 one-request turns; with PAIRS runs per row
# the section takes about 12 minutes, most of it at 10 concurrent, where 2,000 turns of
# 200 ms take 40 s). A level never runs fewer turns than it has concurrent sessions.
TURNS = 2000
# pairs of runs (Strata's, then the bare loop's) per row; a row gives their median: one
# pair's ratio moves by up to ±5% with the machine's speed
PAIRS = 3
# turns a session holds at most (its warm-up turn included), under the L2 window (20)
SESSION_TURNS = 7
FAILED = TERMINAL - {JobStatus.succeeded}
# PostgreSQL: turns per run (at 100 a second, ~10 s: long enough that the start and the
# end of a run, when not every worker is busy, are a small part of it), runs of each worker
# count, taking turns; two workers' CPU per turn at most this multiple of one's
PG_TURNS = 1000
PG_RUNS = 3
PG_MAX_CPU_RATIO = 1.1
LOCK_SAMPLE_SECONDS = 0.05


@contextlib.contextmanager
def workers(
    database_url: str, llm_url: str, concurrency: int, log: Path, count: int = 1
) -> Iterator[list[int]]:
    """`count` `strata worker` processes; yields their pids."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))},
        "STRATA_DATABASE_URL": database_url,
        "ANTHROPIC_BASE_URL": llm_url,
        "ANTHROPIC_API_KEY": "bench",
        "STRATA_LLM_MAX_RETRIES": "0",
        "STRATA_WORKER_CONCURRENCY": str(concurrency),
        "STRATA_WORKER_POLL_SECONDS": "0.05",
        "STRATA_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "app.cli", "worker"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with log.open("ab") as out:
            for _ in range(count):
                procs.append(
                    subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
                )
        yield [p.pid for p in procs]
    finally:
        # killed, not stopped: this copy of the database is thrown away
        for proc in procs:
            proc.kill()
            proc.wait()


async def _sessions(database: Database, count: int) -> list[str]:
    async def create(db: AsyncSession) -> list[str]:
        return [(await create_session(db, TENANT)).id for _ in range(count)]

    return await database.write(create)


async def _enqueue(database: Database, sessions: list[str], first: int, count: int) -> None:
    """Messages `first`…`first + count - 1`, round robin over the sessions, in one transaction."""

    async def enqueue(db: AsyncSession) -> None:
        for n in range(first, first + count):
            sid = sessions[n % len(sessions)]
            await send_message(db, TENANT, sid, f"message {n}", IfBusy.enqueue)

    await database.write(enqueue)


async def _ended(database: Database) -> tuple[int, int]:
    """Chat turns ended, and of those failed. Background jobs (memory summaries) the
    turns queue are not counted here; their CPU is in the worker's."""
    turns = (col(Job.lane) == "session", col(Job.kind) == JobKind.chat)
    async with database.read() as db:
        ended = select(func.count()).select_from(Job).where(*turns, Job.status.in_(TERMINAL))  # type: ignore[attr-defined]
        failed = select(func.count()).select_from(Job).where(*turns, Job.status.in_(FAILED))  # type: ignore[attr-defined]
        return (await db.execute(ended)).scalar_one(), (await db.execute(failed)).scalar_one()


async def _report_failures(database: Database) -> None:
    """Say why turns failed (on stderr, next to the run's progress), so a failure in a
    long run can be told apart from a slow one."""
    turns = (col(Job.lane) == "session", col(Job.kind) == JobKind.chat)
    async with database.read() as db:
        query = select(col(Job.id), col(Job.status), col(Job.error)).where(
            *turns, col(Job.status).in_(FAILED)
        )
        for job_id, status, error in (await db.execute(query)).all():
            print(f"capacity: turn {job_id} {status}: {error}", file=sys.stderr)


async def _until_ended(database: Database, total: int, bound: float) -> tuple[int, int]:
    deadline = time.monotonic() + bound
    while True:
        ended, failed = await _ended(database)
        if ended >= total or time.monotonic() > deadline:
            return ended, failed
        await asyncio.sleep(0.1)


async def _staggered(
    concurrency: int, total: int, arrive: Callable[[int, int], Awaitable[None]]
) -> None:
    """`arrive(first, count)` for batches of the `total`, one every STAGGER_EVERY seconds, at
    the rate an ideal runner would finish them (concurrency ÷ LLM_SECONDS)."""
    per_batch = max(1, round(concurrency / LLM_SECONDS * STAGGER_EVERY))
    started = time.monotonic()
    for first in range(0, total, per_batch):
        await arrive(first, min(per_batch, total - first))
        next_at = started + (first + per_batch) / per_batch * STAGGER_EVERY
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


@dataclass(frozen=True)
class Outcome:
    turns: int
    seconds: float
    cpu_s: float
    failed: int  # failed, aborted, cancelled, or not ended within the bound

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    @property
    def cpu_ms_per_turn(self) -> float:
        return self.cpu_s * 1000 / self.turns


async def strata_run(
    database_url: str,
    llm_url: str,
    workdir: Path,
    concurrency: int,
    turns: int,
    mode: str,
    worker_count: int = 1,
    watch: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> Outcome:
    """One run on a fresh, migrated database: warm the worker(s), then the fixed work,
    inside `watch()` from the work's start (the burst's commit) to its end."""
    database = Database(Settings(_env_file=None, database_url=database_url, data_dir=workdir))
    try:
        sessions = await _sessions(database, max(concurrency, -(-turns // (SESSION_TURNS - 1))))
        with workers(
            database_url, llm_url, concurrency, workdir / "worker.log", worker_count
        ) as pids:
            warm = min(concurrency, WARM_TURNS)
            await _enqueue(database, sessions, 0, warm)
            ended, _ = await _until_ended(database, warm, BOUND_SECONDS)
            if ended < warm:
                raise RuntimeError(f"the worker did not warm up: {ended}/{warm} turns ended")
            cpu_before = sum(cpu_seconds(pid) for pid in pids)
            started = time.monotonic()
            if mode == "burst":
                # the clock and the CPU count start at the burst's commit: no worker sees a
                # turn before it, and while the bench writes, the workers only poll (on
                # PostgreSQL the write of 300 turns took 6-8 s, a third of the run)
                await _enqueue(database, sessions, warm, turns)
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                started = time.monotonic()
            else:

                async def arrive(first: int, count: int) -> None:
                    await _enqueue(database, sessions, warm + first, count)

                await _staggered(concurrency, turns, arrive)
            with watch():
                ended, failed = await _until_ended(database, warm + turns, BOUND_SECONDS)
            seconds = time.monotonic() - started
            cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
            if failed:
                await _report_failures(database)
    finally:
        await database.dispose()
    return Outcome(turns, seconds, cpu, failed + max(0, warm + turns - ended))


async def bare_run(
    llm_url: str, concurrency: int, calls: int, request: dict[str, Any], mode: str = "burst"
) -> Outcome:
    """The yardstick: `concurrency` asyncio tasks making `calls` streaming calls in all,
    each consuming its stream as Strata does; this process's CPU over them. The clients
    are configured as Strata's (`AnthropicLLM`): the SDK's default connection pool, at
    most `llm_requests_per_pool` requests in flight on one client (`ClientPools`).
    `staggered`: the calls arrive as a staggered run's turns do, at most `concurrency` of
    them in flight; otherwise each task makes its next call as soon as its last ended.

    Each call sends `request`, a body Strata sent (its conversation and tool definitions).
    The SDK's own work grows with the body (it copies and encodes every part of it): with
    a one-line request instead, the bare loop's CPU per call would count the size of
    Strata's requests as Strata's overhead."""
    params = dict(request)
    params.pop("stream", None)  # `messages.stream` sets it
    failed = 0

    def client() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key="bench", base_url=llm_url, max_retries=0, timeout=600
        )

    pools = ClientPools(client, Settings(_env_file=None).llm_requests_per_pool)
    try:

        async def call() -> None:
            nonlocal failed
            try:
                with pools.client() as pooled:
                    async with pooled.messages.stream(**params) as stream:
                        async for _event in stream:
                            pass
                        await stream.get_final_message()
            except anthropic.APIError:
                failed += 1

        async def lane(count: int) -> None:
            for _ in range(count):
                await call()

        async def round_of(total: int) -> None:
            lanes = [total // concurrency + (i < total % concurrency) for i in range(concurrency)]
            await asyncio.gather(*(lane(n) for n in lanes if n))

        async def arriving(total: int) -> None:
            slots = asyncio.Semaphore(concurrency)
            made: list[asyncio.Task[None]] = []

            async def in_a_slot() -> None:
                async with slots:
                    await call()

            async def arrive(_first: int, count: int) -> None:
                made.extend(asyncio.create_task(in_a_slot()) for _ in range(count))

            await _staggered(concurrency, total, arrive)
            await asyncio.gather(*made)

        await round_of(min(concurrency, WARM_TURNS))  # warm-up: connections, imports
        cpu, started = time.process_time(), time.monotonic()
        await (arriving(calls) if mode == "staggered" else round_of(calls))
        return Outcome(calls, time.monotonic() - started, time.process_time() - cpu, failed)
    finally:
        await pools.close()


def nondecreasing(rates: list[float], tolerance: float = 0.05) -> bool:
    """Throughput that never falls as concurrency grows, within `tolerance` (run-to-run
    noise on a shared machine): more concurrent turns must not cost each other."""
    return all(later >= (1 - tolerance) * earlier for earlier, later in itertools.pairwise(rates))


async def _sqlite_level(
    ctx: Context, fake: fake_llm.FakeLLM, template: Path, concurrency: int, turns: int, mode: str
) -> Outcome:
    path = ctx.workdir / f"run-{concurrency}-{mode}.db"
    shutil.copyfile(template, path)
    try:
        return await strata_run(
            f"sqlite:///{path}", fake.url, ctx.workdir, concurrency, turns, mode
        )
    finally:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Pair:
    strata: Outcome
    bare: Outcome  # calls back to back
    bare_arriving: Outcome | None  # calls arriving as Strata's staggered turns did

    @property
    def yardstick(self) -> Outcome:
        """The bare loop driving its calls as Strata's run got its turns: with the same
        arrivals after a staggered run, back to back after a burst (all there at once)."""
        return self.bare_arriving or self.bare


async def _pair(
    ctx: Context, fake: fake_llm.FakeLLM, template: Path, concurrency: int, work: int, mode: str
) -> Pair:
    """Strata's run, then the bare loop's right after it (the machine's speed drifts over
    minutes), sending a request of Strata's run; after a staggered run, the bare loop's
    with the same arrivals too."""
    fake.take_typical_request()  # forget the requests of the run before
    out = await _sqlite_level(ctx, fake, template, concurrency, work, mode)
    request = fake.take_typical_request()
    if request is None:
        raise RuntimeError("no request of Strata's turns reached the fake")
    bare = await bare_run(fake.url, concurrency, work, request)
    if mode != "staggered":
        return Pair(out, bare, None)
    return Pair(out, bare, await bare_run(fake.url, concurrency, work, request, mode))


def _cpu_ratio(pairs: Iterable[tuple[Outcome, Outcome]]) -> Stats:
    """Strata's CPU per turn over the bare loop's per call, pair by pair."""
    return Stats.of((strata.cpu_ms_per_turn / bare.cpu_ms_per_turn for strata, bare in pairs), "×")


async def run(ctx: Context) -> Section:
    turns = ctx.scale(TURNS, 200)
    levels = [10, 100, 1000] if not ctx.quick else [10, 100]
    section = Section(
        name="capacity",
        title="Runner capacity: worker CPU per one-request turn, fake LLM answering after 200 ms",
        target=(
            f"worker CPU per turn ≤ {MAX_CPU_RATIO:g}× a bare asyncio SDK loop's CPU per call "
            "at the same concurrency; saturated turns/s never decreasing as concurrency grows "
            f"({', '.join(f'{c:,}' for c in levels)}); 0 failed turns ({turns:,} turns per run or "
            "one per concurrent session, "
            "SQLite, one worker; PostgreSQL scale with two workers reported)"
        ),
    )
    started = time.monotonic()
    template = ctx.workdir / "template.db"
    upgrade_to_head(f"sqlite:///{template}")
    burst_rates: list[float] = []
    with fake_llm.running(delay=LLM_SECONDS) as fake:
        for concurrency in levels:
            work = max(turns, concurrency)
            for mode in ("staggered", "burst"):
                pairs = [
                    await _pair(ctx, fake, template, concurrency, work, mode) for _ in range(PAIRS)
                ]
                cpu = Stats.of((p.strata.cpu_ms_per_turn for p in pairs), "ms")
                # the bare loop's "turn" is one call; the target's yardstick drives the
                # calls as Strata's run got them (a burst: back to back)
                bare_cpu = Stats.of((p.yardstick.cpu_ms_per_turn for p in pairs), "ms")
                ratio = _cpu_ratio((p.strata, p.yardstick) for p in pairs)
                busy = (
                    _cpu_ratio((p.strata, p.bare) for p in pairs) if mode == "staggered" else None
                )
                rate = Stats.of((p.strata.rate for p in pairs), "")
                bare_rate = Stats.of((p.bare.rate for p in pairs), "")
                failed = sum(p.strata.failed for p in pairs)
                bare_failed = sum(
                    p.bare.failed + (p.bare_arriving.failed if p.bare_arriving else 0)
                    for p in pairs
                )
                took = Stats.of((p.strata.seconds for p in pairs), "s")
                if mode == "burst":
                    burst_rates.append(rate.median)
                section.rows.append(
                    Row(
                        label=f"SQLite · {concurrency:,} concurrent · {mode}",
                        cells={
                            "worker CPU per turn": cpu.cell(),
                            "bare loop CPU per call": bare_cpu.cell(),
                            "ratio": ratio.cell(),
                            "ratio to a bare loop calling back to back": "—"
                            if busy is None
                            else busy.cell(),
                            "turns/s": f"{rate.median:,.1f}",
                            "bare calls/s (back to back)": f"{bare_rate.median:,.1f}",
                            "ideal turns/s": f"{concurrency / LLM_SECONDS:,.0f}",
                            "took": f"{took.median:.1f} s ({work:,} turns)",
                            "failed turns": str(failed + bare_failed),
                        },
                        meets=ratio.median <= MAX_CPU_RATIO and failed == 0,
                        data={
                            "cpu_ms_per_turn": cpu.as_dict(),
                            "bare_cpu_ms_per_call": bare_cpu.as_dict(),
                            "ratio": ratio.as_dict(),
                            "ratio_back_to_back": None if busy is None else busy.as_dict(),
                            "rate": rate.as_dict(),
                            "bare_rate": bare_rate.as_dict(),
                            "seconds": [p.strata.seconds for p in pairs],
                            "failed": failed,
                            "bare_failed": bare_failed,
                        },
                    )
                )
        pg_note = await _postgresql(ctx, fake, section, ctx.scale(PG_TURNS, 100))
    flat = nondecreasing(burst_rates)
    section.notes.append(
        "**Throughput as concurrency grows** (burst, turns/s): "
        + " → ".join(f"{r:,.1f}" for r in burst_rates)
        + (": never decreasing (within 5%)." if flat else ": **decreasing**, target not met.")
    )
    section.notes.append(
        f"{PAIRS} pairs of runs per row, a cell giving their median (min–max), the ratio "
        "taken pair by pair; "
        f"each run {turns:,} turns, or as many as the concurrency if more, after "
        f"{WARM_TURNS} or fewer warm-up turns, over as many sessions as the concurrency, "
        f"or more so that none holds over {SESSION_TURNS} turns (no turn ends past the "
        "memory's L2 window, where it would also queue an L1 summary, an LLM call of its "
        "own); the "
        "bare loop runs just after each of Strata's runs (the machine's speed drifts "
        "over minutes), against the same fake, "
        "with its clients set up as Strata's (at most `STRATA_LLM_REQUESTS_PER_POOL` "
        "requests in flight on one SDK client's connection pool), every call sending one "
        "request Strata's turns sent in that run, of their median length (its "
        "conversation and tool definitions; the SDK copies and encodes each part of a "
        "body, so a one-line request would count the size of Strata's requests as Strata's "
        "overhead). "
        "A row's CPU ratio is Strata's worker CPU per turn over the bare loop's CPU per call, "
        "the bare loop driving the same number of concurrent calls as Strata's run: back to "
        "back after a burst, and after a staggered run with the same arrivals (batches every "
        f"{STAGGER_EVERY * 1000:.0f} ms at the rate the concurrency allows, at most the "
        "concurrency in flight), where both wait between arrivals; a staggered row also "
        "gives its ratio to the bare loop calling back to back (always busy, the cheapest "
        "per call), which is not the target's; "
        "a Strata turn also claims its job, persists the message, the answer and the usage, "
        "publishes events and ends the job, and the worker also runs the background jobs the "
        "turns queue (memory summaries), whose CPU is in the figure. Failed turns: failed, "
        "aborted or cancelled jobs, "
        f"and turns not ended within {BOUND_SECONDS:.0f} s."
    )
    section.notes.append(pg_note)
    section.notes.append(f"This section took {time.monotonic() - started:.0f} s.")
    return section


@dataclass
class LockWaits:
    """`pg_locks` sampled while a run goes: the samples, those that found a lock not
    granted, and the most waiting at once."""

    samples: int = 0
    waiting: int = 0
    most: int = 0

    def saw(self, not_granted: int) -> None:
        self.samples += 1
        self.waiting += not_granted > 0
        self.most = max(self.most, not_granted)


@contextlib.contextmanager
def lock_waits(pg: Any, found: LockWaits) -> Iterator[LockWaits]:
    """Sample `pg_locks` into `found` every LOCK_SAMPLE_SECONDS, on a thread of its own,
    until the block ends."""
    import threading

    stop = threading.Event()

    def sample() -> None:
        with pg.connect() as connection:
            connection.autocommit = True
            while not stop.wait(LOCK_SAMPLE_SECONDS):
                row = connection.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                ).fetchone()
                found.saw(int(row[0]) if row else 0)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()


async def _postgresql(ctx: Context, fake: fake_llm.FakeLLM, section: Section, turns: int) -> str:
    from bench.api_throughput import postgres

    concurrency = 100
    runs = ctx.scale(PG_RUNS, 1)
    outcomes: dict[int, list[Outcome]] = {1: [], 2: []}
    locks = LockWaits()
    with postgres() as pg:
        for run_no in range(runs):
            for count in (1, 2):
                url = pg.create_database(f"capacity{count}_{run_no}")
                upgrade_to_head(url)
                watch = (lambda: lock_waits(pg, locks)) if count == 2 else contextlib.nullcontext
                outcomes[count].append(
                    await strata_run(
                        url, fake.url, ctx.workdir, concurrency, turns, "burst", count, watch
                    )
                )
    for count, outs in outcomes.items():
        cpu = Stats.of((o.cpu_ms_per_turn for o in outs), "ms")
        rate = Stats.of((o.rate for o in outs), "")
        failed = sum(o.failed for o in outs)
        section.rows.append(
            Row(
                label=f"PostgreSQL · {concurrency} concurrent · burst · {count} worker(s)",
                cells={
                    "worker CPU per turn": cpu.cell(),
                    "turns/s": f"{rate.median:,.1f}",
                    "took": f"{Stats.of((o.seconds for o in outs), 's').median:.1f} s "
                    f"({turns:,} turns)",
                    "failed turns": str(failed),
                },
                meets=None if failed == 0 else False,
                data={
                    "cpu_ms_per_turn": cpu.as_dict(),
                    "rate": rate.as_dict(),
                    "failed": failed,
                    "workers": count,
                },
            )
        )
    pairs = list(zip(outcomes[1], outcomes[2], strict=True))
    cpu_ratio = Stats.of((two.cpu_ms_per_turn / one.cpu_ms_per_turn for one, two in pairs), "×")
    scale = Stats.of((two.rate / one.rate for one, two in pairs), "×")
    section.rows.append(
        Row(
            label="PostgreSQL · 2 workers' CPU per turn over 1 worker's",
            cells={
                "ratio": cpu_ratio.cell(),
                "lock waits (2 workers)": f"{locks.waiting} of {locks.samples} samples "
                f"(at most {locks.most} at once)",
                "turns/s": f"2 workers' over 1's: {scale.cell()}",
            },
            meets=cpu_ratio.median <= PG_MAX_CPU_RATIO and locks.waiting == 0,
            data={
                "cpu_ratio": cpu_ratio.as_dict(),
                "scale": scale.as_dict(),
                "lock_wait_samples": locks.waiting,
                "samples": locks.samples,
                "most_waiting": locks.most,
            },
        )
    )
    return (
        f"**PostgreSQL, two worker processes:** {runs} run(s) of {turns:,} turns at "
        f"{concurrency} concurrent per worker with one worker and with two, taking turns, on "
        "fresh databases; the clock and the CPU count start once the burst is committed. "
        "Target: two workers' "
        f"CPU per turn ≤ {PG_MAX_CPU_RATIO:g}× one's (summed over the workers), pair by pair, "
        f"and no lock waits (`pg_locks` sampled every {LOCK_SAMPLE_SECONDS * 1000:.0f} ms for "
        "locks not granted while two workers run). **What two cores can and cannot show:** "
        "both workers, PostgreSQL, the fake and this process share the machine's 2 cores, "
        "and one worker at this concurrency already keeps most of one busy, so two workers "
        "cannot run twice the turns/s here and their scale factor says more about the "
        "machine than about the design; what the cores cannot hide is the cost per turn and "
        "the contention: two workers that claim, write and end turns without waiting on "
        "each other spend the same CPU per turn as one and never wait on a lock. Whether "
        "they scale out is for a machine with a core per worker and one for the database."
    )
