"""Runner capacity: how close one worker process comes to the ideal turn rate.

One `strata worker` process runs chat turns against the fake Messages API, which
answers every request after 200 ms. C sessions have K messages queued each; a
session's turns run one after another, sessions in parallel, so the ideal rate is
C turns per 200 ms. The ratio is the achieved rate ÷ that ideal. The worker's
concurrency is set to C (`STRATA_WORKER_CONCURRENCY`), as an operator would.

The turns are queued through the service (`send_message`) before the worker
starts; the clock starts when the worker takes its first turn and stops at the last
turn's end, or after WINDOW seconds, counting the turns finished by then, so a
slow level cannot stretch the suite. The worker process's CPU time per turn is
reported too: it bounds the rate whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Job
from app.services.chat import IfBusy, send_message
from app.services.jobs import TERMINAL
from app.services.sessions import create_session
from app.settings import Settings
from bench import fake_llm
from bench.common import Context, Row, Section, Stats

LLM_SECONDS = 0.2
TARGET_RATIO = 0.9
TENANT = "default"
PER_SESSION = 2
WINDOW = 6.0


@contextlib.contextmanager
def worker(database_url: str, llm_url: str, concurrency: int, log: Path) -> Iterator[int]:
    """A `strata worker` process; yields its pid."""
    env = {
        **os.environ,
        "STRATA_DATABASE_URL": database_url,
        "ANTHROPIC_BASE_URL": llm_url,
        "ANTHROPIC_API_KEY": "bench",
        "STRATA_WORKER_CONCURRENCY": str(concurrency),
        "STRATA_WORKER_POLL_SECONDS": "0.05",
        "STRATA_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "app.cli", "worker"]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc.pid
    finally:
        # killed, not stopped: a graceful stop would hand hundreds of running turns
        # back one transaction each, and this copy of the database is thrown away
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _template(path: Path, concurrency: int) -> None:
    """C sessions with PER_SESSION messages queued each, round robin (not timed)."""
    url = f"sqlite:///{path}"
    upgrade_to_head(url)
    database = Database(Settings(_env_file=None, database_url=url, data_dir=path.parent))
    try:

        async def enqueue(db: AsyncSession) -> None:
            sessions = [(await create_session(db, TENANT)).id for _ in range(concurrency)]
            for k in range(PER_SESSION):
                for session_id in sessions:
                    await send_message(db, TENANT, session_id, f"message {k}", IfBusy.enqueue)

        await database.write(enqueue)
    finally:
        await database.dispose()


async def _progress(database: Database) -> tuple[dt.datetime | None, int]:
    """When the first turn started, and how many turns have ended."""
    async with database.read() as db:
        first = (await db.execute(select(func.min(Job.started_at)))).scalar_one()
        ended = select(func.count()).select_from(Job).where(Job.status.in_(TERMINAL))  # type: ignore[attr-defined]
        return first, (await db.execute(ended)).scalar_one()


async def _outcome(database: Database, start: dt.datetime) -> tuple[int, float, int]:
    """Turns succeeded within the window, the time they took, and turns that failed."""
    until = start + dt.timedelta(seconds=WINDOW)
    async with database.read() as db:
        in_window = Job.finished_at <= until  # type: ignore[operator]
        done = select(func.count(), func.max(Job.finished_at)).where(
            Job.status == "succeeded", in_window
        )
        count, last = (await db.execute(done)).one()
        failed = (
            select(func.count())
            .select_from(Job)
            .where(
                Job.status.in_(("failed", "aborted", "cancelled")),  # type: ignore[attr-defined]
                in_window,
            )
        )
        failures = (await db.execute(failed)).scalar_one()
    elapsed = (last - start).total_seconds() if last is not None else WINDOW
    return count, elapsed, failures


async def _one_run(
    template: Path, workdir: Path, llm_url: str, concurrency: int
) -> tuple[float, float, int]:
    """(turns/s, worker CPU ms per turn, turns that failed) of one run on a copy."""
    path = workdir / f"run-{concurrency}.db"
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    database = Database(Settings(_env_file=None, database_url=url, data_dir=workdir))
    total = concurrency * PER_SESSION
    try:
        with worker(url, llm_url, concurrency, workdir / "worker.log") as pid:
            cpu_before: float | None = None
            start: dt.datetime | None = None
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                first, ended = await _progress(database)
                if first is not None and start is None:
                    start, cpu_before = first, cpu_seconds(pid)
                    deadline = time.monotonic() + WINDOW + 1
                if ended >= total:
                    break
                await asyncio.sleep(0.1)
            cpu = cpu_seconds(pid) - (cpu_before or 0.0)
        if start is None:
            raise RuntimeError("the worker took no turn within 120 s")
        done, elapsed, failed = await _outcome(database, start)
        if done < total:  # cut by the window: the rate is over the whole window
            elapsed = WINDOW
        async with database.read() as db:
            ended_total = (
                await db.execute(
                    select(func.count()).select_from(Job).where(Job.status.in_(TERMINAL))  # type: ignore[attr-defined]
                )
            ).scalar_one()
    finally:
        await database.dispose()
        path.unlink(missing_ok=True)
    return done / elapsed, (cpu * 1000 / ended_total if ended_total else float("nan")), failed


async def run(ctx: Context) -> Section:
    section = Section(
        name="capacity",
        title="Runner capacity: one worker process, fake LLM answering after 200 ms",
        target=(
            f"achieved turns/s ÷ ideal turns/s ≥ {TARGET_RATIO} at 10, 100, 500 and "
            "1,000 concurrent chat turns (SQLite)"
        ),
    )
    levels = [10, 100, 500, 1000] if not ctx.quick else [10, 100]
    runs = min(ctx.runs, 3)
    with fake_llm.running(delay=LLM_SECONDS) as llm_url:
        for concurrency in levels:
            template = ctx.workdir / f"template-{concurrency}.db"
            await _template(template, concurrency)
            rates: list[float] = []
            cpu: list[float] = []
            failures = 0
            for _ in range(runs):
                rate, cpu_ms, failed = await _one_run(template, ctx.workdir, llm_url, concurrency)
                rates.append(rate)
                cpu.append(cpu_ms)
                failures += failed
            template.unlink()
            ideal = concurrency / LLM_SECONDS
            ratio = Stats.of([r / ideal for r in rates], "")
            section.rows.append(
                Row(
                    label=f"{concurrency:,} concurrent",
                    cells={
                        "ideal turns/s": f"{ideal:,.0f}",
                        "achieved turns/s": Stats.of(rates, "").cell(1),
                        "ratio": ratio.cell(3),
                        "worker CPU per turn": (
                            Stats.of(cpu, "ms").cell(1)
                            if all(c == c for c in cpu)  # NaN: no turn ended in the window
                            else "— (no turn ended)"
                        ),
                        "failed turns": str(failures),
                    },
                    meets=ratio.median >= TARGET_RATIO and failures == 0,
                    data={
                        "ratio": ratio.as_dict(),
                        "rate": Stats.of(rates, "/s").as_dict(),
                        "cpu_ms_per_turn": [c if c == c else None for c in cpu],
                    },
                )
            )
    section.notes.append(
        f"{PER_SESSION} messages per session; {runs} runs per level, each on a fresh copy of "
        f"the queued database; a run stops after {WINDOW:g} s of turns. One CPU core can run "
        "at most 1000 ÷ (CPU ms per turn) turns/s, whatever the concurrency: the worker is "
        "one Python process, so its CPU per turn, not the LLM's 200 ms, sets the pace once "
        "a handful of turns run at once. With hundreds of turns started together, they "
        "advance in step, each waiting for the others' database work, so none may end "
        "within the window."
    )
    return section
