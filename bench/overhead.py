"""Request overhead: Strata's own work per LLM request, at growing log lengths.

What is timed is the gap between one LLM response arriving and the next request
leaving: persisting the response (item, usage, events), running the tool and
persisting its result, reading the segment back, building the request, and the
interceptors (the task reminder reads the session and replays the task log).
The fake Messages API, in a process of its own, answers at once with one more tool
call, so a chat turn keeps making requests; the time inside the SDK call (HTTP on
loopback, SSE parsing) is reported beside it, and is not Strata's work.

The log holds 100, 10,000 or 100,000 items; the current segment holds 200 of
them (all, for the 100-item log). Flat figures across the three sizes mean no
request scans the whole log.
"""

from __future__ import annotations

import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.types import utcnow
from app.domain.ids import new_id
from app.engine.anthropic import AnthropicLLM
from app.engine.llm import LLMRequest, LLMResponse, TextSink
from app.services.chat import IfBusy, send_message
from app.services.live import LiveHub
from app.settings import Settings
from app.wiring import builtin_tools, piece_catalog
from app.worker.handlers import Deps, run_chat
from bench import fake_llm
from bench.common import Context, Row, Section, Stats
from bench.seed import TENANT, session_with_log

SEGMENT = 200
REQUESTS_PER_TURN = 12
TARGET_MS = 2.0


class StopwatchLLM:
    """The real SDK client, with the moments each call started and ended."""

    def __init__(self, inner: AnthropicLLM) -> None:
        self.inner = inner
        self.calls: list[tuple[float, float]] = []

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request, on_text)
        finally:
            self.calls.append((started, time.perf_counter()))

    def gaps_ms(self) -> list[float]:
        """Strata's time between a response and the next request, per request."""
        return [(b[0] - a[1]) * 1000 for a, b in zip(self.calls, self.calls[1:], strict=False)]

    def sdk_ms(self) -> list[float]:
        return [(end - start) * 1000 for start, end in self.calls]


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


async def _one_turn(settings: Settings, session_id: str) -> tuple[list[float], list[float]]:
    """One chat turn of REQUESTS_PER_TURN requests; the gaps and SDK times it had."""
    database = Database(settings)
    llm = StopwatchLLM(AnthropicLLM(settings))
    deps = Deps(
        settings, database, LiveHub(), llm, builtin_tools(settings), piece_catalog(settings)
    )
    try:

        async def claimed_turn(db: AsyncSession) -> Job:
            job = await send_message(db, TENANT, session_id, "Go on.", IfBusy.reject)
            await JobRepository(db).take(job, new_id("w"), utcnow() + timedelta(hours=1))
            return job

        job = await database.write(claimed_turn)
        await run_chat(deps, job)
    finally:
        await llm.inner.close()
        await database.dispose()
    return llm.gaps_ms(), llm.sdk_ms()


async def _template(workdir: Path, items: int) -> tuple[Path, str]:
    path = workdir / f"log-{items}.db"
    url = f"sqlite:///{path}"
    upgrade_to_head(url)
    database = Database(Settings(_env_file=None, database_url=url, data_dir=workdir))
    try:
        session_id = await session_with_log(database, items, SEGMENT)
    finally:
        await database.dispose()
    return path, session_id


async def run(ctx: Context) -> Section:
    section = Section(
        name="overhead",
        title="Request overhead per LLM request",
        target=(
            f"≤ {TARGET_MS:g} ms median per request and flat in log length, at logs of "
            f"100, 10,000 and 100,000 items with a {SEGMENT}-item segment (SQLite)"
        ),
    )
    sizes = [100, 10_000, ctx.scale(100_000, 20_000)]
    with fake_llm.running(delay=0.0, tool="CurrentTime") as url:
        for items in sizes:
            template, session_id = await _template(ctx.workdir, items)
            medians: list[float] = []
            sdk: list[float] = []
            for run_no in range(ctx.runs):
                copy = ctx.workdir / f"run-{items}-{run_no}.db"
                shutil.copyfile(template, copy)
                settings = _settings(url, f"sqlite:///{copy}", ctx.workdir / "data")
                gaps, calls = await _one_turn(settings, session_id)
                medians.append(Stats.of(gaps, "ms").median)
                sdk.append(Stats.of(calls, "ms").median)
                copy.unlink()
            own = Stats.of(medians, "ms")
            section.rows.append(
                Row(
                    label=f"{items:,} items",
                    cells={
                        "Strata's work per request": own.cell(),
                        "SDK call to the instant fake (not Strata's)": Stats.of(sdk, "ms").cell(),
                    },
                    meets=own.median <= TARGET_MS,
                    data={"own": own.as_dict(), "sdk": Stats.of(sdk, "ms").as_dict()},
                )
            )
            template.unlink()
    section.notes.append(
        f"Each run is one chat turn of {REQUESTS_PER_TURN} requests on a fresh copy of the "
        f"database; a run's figure is the median of its {REQUESTS_PER_TURN - 1} gaps, "
        "and the cell gives the median (min–max) of the runs."
    )
    shutil.rmtree(ctx.workdir / "data", ignore_errors=True)
    return section
