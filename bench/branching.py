"""Fork and rewind: what they cost, and that a fork's cost does not grow with the log.

A fork writes one session row that names the parts of its parent's log it reads
(`app.domain.lineage`); a rewind appends one item and rewrites the session's lineage.
Neither copies an item, so both should cost the same for any log length. Each is timed
as the API runs it, one write unit of work (`Database.write`) calling the service, on
sessions of two lengths filled like `bench/replay.py`'s mixed log (chat turns of 10 items
with task operations at 5 % of the items). Filling is not timed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.services import branching
from bench.common import Context, Row, Section, Stats
from bench.replay import TABLES, add_sessions, bulk_insert, database, migrated_database, mixed_log

NAME = "branching"
TITLE = "Fork and rewind"
TARGET = "Fork of a 100k-item session < 50 ms and O(1) in the parent's length; rewind < 50 ms."
TENANT = "bench"
TARGET_MS = 50.0
CALLS = 20


async def _timed(db: Database, work: Callable[[AsyncSession], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await db.write(work)
    return (time.perf_counter() - start) * 1000.0


async def _calls(db: Database, n: int, work: Callable[[AsyncSession], Awaitable[Any]]) -> Stats:
    await db.write(work)  # warms the pool, statement and page caches
    return Stats.of([await _timed(db, work) for _ in range(n)], "ms")


def _fork(session_id: str, at_seq: int) -> Callable[[AsyncSession], Awaitable[Any]]:
    async def fork(db: AsyncSession) -> Any:
        return await branching.fork_session(db, TENANT, session_id, at_seq=at_seq)

    return fork


def _rewinds(session_id: str, there: int) -> Callable[[AsyncSession], Awaitable[Any]]:
    """A rewind to `there`, then its undo, alternately: every call is one rewind."""
    back: list[int] = []

    async def rewind(db: AsyncSession) -> Any:
        to_seq = back.pop() if back else there
        done = await branching.rewind_session(db, TENANT, session_id, to_seq=to_seq)
        if to_seq == there:
            back.append(done.from_seq)
        return done

    return rewind


def _row(label: str, stats: Stats, target: float | None, **data: Any) -> Row:
    met = None if target is None else stats.median < target
    return Row(label, {"median (min–max)": stats.cell(1)}, met, {"stats": stats.as_dict(), **data})


async def run(ctx: Context) -> Section:
    large = ctx.scale(100_000, 10_000)
    small = large // 10
    url, engine = migrated_database(ctx.workdir / "branching.db")
    logs = {size: mixed_log(f"ses_{size}", size, 0.05) for size in (small, large)}
    add_sessions(
        engine,
        [
            Session(
                id=f"ses_{size}",
                tenant=TENANT,
                last_seq=size,
                current_turn=log[-1]["turn"],
            )
            for size, log in logs.items()
        ],
    )
    started = time.perf_counter()
    for log in logs.values():
        bulk_insert(engine, TABLES["items"], log)
    fill_s = time.perf_counter() - started
    engine.dispose()

    def turn_end(log: list[dict[str, Any]]) -> int:
        """The last item of the turn before the last: a point outside any tool call."""
        last_turn = log[-1]["turn"]
        return int(max(row["seq"] for row in log if row["turn"] == last_turn - 1))

    n = max(ctx.runs, CALLS)
    load_before = os.getloadavg()[0]
    db = database(url)
    try:
        # the forks of the two sizes alternate, so that both meet the same load
        forks = {size: _fork(f"ses_{size}", turn_end(logs[size])) for size in (small, large)}
        for work in forks.values():
            await db.write(work)  # warms the pool, statement and page caches
        times: dict[int, list[float]] = {small: [], large: []}
        for _ in range(n):
            for size, work in forks.items():
                times[size].append(await _timed(db, work))
        fork_small, fork_large = (Stats.of(times[size], "ms") for size in (small, large))
        rewind_large = await _calls(db, n, _rewinds(f"ses_{large}", turn_end(logs[large])))
    finally:
        await db.dispose()
    load_after = os.getloadavg()[0]
    ratio = fork_large.median / fork_small.median
    ratio_min = fork_large.min / fork_small.min
    k_small, k_large = f"{small // 1000}k", f"{large // 1000}k"
    rows = [
        _row(f"fork of a {k_small}-item session", fork_small, TARGET_MS, items=small),
        _row(f"fork of a {k_large}-item session", fork_large, TARGET_MS, items=large),
        Row(
            f"fork at {k_large} / fork at {k_small}, fastest calls (O(1): about 1)",
            {"median (min–max)": f"{ratio_min:.2f}×"},
            ratio_min < 2.0,
            {"ratio": ratio_min},
        ),
        Row(
            f"fork at {k_large} / fork at {k_small}, medians",
            {"median (min–max)": f"{ratio:.2f}×"},
            None,
            {"ratio": ratio},
        ),
        _row(
            f"rewind of a {k_large}-item session (a rewind and its undo, alternately)",
            rewind_large,
            TARGET_MS,
            items=large,
        ),
    ]
    notes = [
        f"Each figure is {n} calls after a warm-up, each one write unit of work on SQLite "
        f"(the process's writer thread, commit included) calling `fork_session` at the end "
        f"of the turn before the last (`at_seq`), or `rewind_session` there and back "
        f"(`to_seq`). A fork reads the session row, the item at the point and that turn's "
        f"items (to refuse a point inside a tool call), and writes one session row and its "
        f"`session.forked` event; a rewind also opens a segment and appends its item. "
        f"Filling {small + large:,} items took {fill_s:.0f} s (not timed).",
        f"The machine was loaded while these were measured (other work shared it: load "
        f"average {load_before:.1f} before and {load_after:.1f} after, on {os.cpu_count()} "
        f"cores), so single calls vary widely, by several times; the two sizes' forks "
        f"alternate so that both meet the same load, and the ratio of their fastest calls "
        f"(the least disturbed) is the measure of growth with the log's length. A fork's "
        f"statements are index look-ups of the point and its turn: none reads the log.",
    ]
    return Section(NAME, TITLE, TARGET, rows=rows, notes=notes)
