"""Memory search: what the model's `memory_search` costs on a long history, and what keeping
its full-text index costs a turn's end.

Two measurements, on SQLite (the replay benchmark's memory tables, `bench.replay`):

- **Search.** A tenant holding a million memory turns: a chain of 10 sessions (999,800 turns,
  one project) and an older, small chain of another project (200 turns, the lowest row ids).
  Each query goes through `app.services.memory_search.search`, the service the MCP tool
  `memory_search` and `GET /memory/search` call, tenant-wide as the MCP tool asks it, in a
  fresh unit of work as a request runs it: a word of one turn, a phrase of one turn, a word
  of every turn, a phrase of every turn, and with a project and a `since`.
- **Projection.** A turn's end writes its L2/L3 (`app.services.memory.project_turns`, in a
  write unit of work with its commit, its texts cleaned ahead as the worker does). The same
  turn is projected into two copies of the million-turn database, one with the full-text
  index's triggers and one without them, taking turns run by run: the ratio is what keeping
  the index adds.
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.domain.items import load_payload
from app.services import memory, memory_search
from app.settings import Settings
from bench.common import Context, Row, Section, Stats
from bench.replay import (
    T0,
    TABLES,
    WINDOW,
    TaskLog,
    TimedCall,
    _calls,
    _row,
    add_sessions,
    bulk_insert,
    chain,
    database,
    detail_rows,
    migrated_database,
    turn_rows,
)

NAME = "memory_search"
TITLE = "Memory search"
TARGET = (
    "`memory_search` on a 1M-turn history < 20 ms median; the full-text index adds ≤ 10% "
    "to a turn's projection."
)
TENANT = "bench"
SEARCH_TARGET_MS = 20.0
PROJECTION_TARGET = 1.10
LIMITS = memory_search.SearchLimits.of(Settings())
BIG_PROJECT = "/home/dev/parser"
SMALL_PROJECT = "/home/dev/notes"
PROJECTED = "ses_projected"
# the FTS5 triggers that keep the index on insert (`app.db.fulltext`)
INDEX_TRIGGERS = ("memory_turns_fts_insert", "memory_details_fts_insert")


def _search(query: str, **scope: Any) -> TimedCall:
    request = memory_search.SearchRequest(query, **scope)
    return lambda s: memory_search.search(s, TENANT, request, LIMITS)


async def search_rows(ctx: Context, path: Path) -> tuple[list[Row], list[str]]:
    total = ctx.scale(1_000_000, 10_000)
    small = chain("ses_small", 2, 100, datetime(2025, 6, 1, 9, 0, tzinfo=UTC), 83)
    big = chain("ses_big", 10, (total - small.turns) // 10, T0, 47)
    url, engine = migrated_database(path)
    sessions = big.session_rows() + small.session_rows()
    for row in sessions:
        row.project = BIG_PROJECT if row.id.startswith("ses_big") else SMALL_PROJECT
    add_sessions(engine, sessions)
    started = time.perf_counter()
    # the small chain first: its turns have the lowest ids, the far end of a newest-first scan
    for c, first_id, every in ((small, 1, 1), (big, small.turns + 1, 10)):
        bulk_insert(engine, TABLES["memory_turns"], turn_rows(c, first_id, WINDOW))
        bulk_insert(engine, TABLES["memory_details"], detail_rows(c, first_id, every))
    fill_s = time.perf_counter() - started
    _seed_projected_log(engine, ctx)
    engine.dispose()

    calls = max(20, ctx.runs * 10)
    index = big.turns // 2
    last = big.ended_at(big.turns - 1)
    day = last - timedelta(days=1)
    queries: list[tuple[str, TimedCall, str]] = [
        (f"a word of one turn: `{index}`", _search(str(index)), "rare"),
        (f'a phrase of one turn: `"question {index}"`', _search(f'"question {index}"'), "rare"),
        ("a word of every turn: `parser`", _search("parser"), "common"),
        ("a word of every turn and every L3: `line`", _search("line"), "common"),
        ('a phrase of every turn: `"splits on commas"`', _search('"splits on commas"'), "common"),
        (
            f"`parser`, project `{BIG_PROJECT}` ({big.turns:,} turns)",
            _search("parser", project=BIG_PROJECT),
            "project",
        ),
        (
            f"`parser`, project `{SMALL_PROJECT}` ({small.turns} turns, the oldest ids)",
            _search("parser", project=SMALL_PROJECT),
            "project",
        ),
        ("`parser`, since a day before the newest turn", _search("parser", since=day), "since"),
        (
            f"`{index}`, since a day before the newest turn (no hit)",
            _search(str(index), since=day),
            "since",
        ),
    ]
    db = database(url)
    rows: list[Row] = []
    try:
        for label, call, kind in queries:
            async with db.read() as session:
                found = await call(session)
            hits = len(found) if isinstance(found, list) else 0
            stats = await _calls(db, calls, call)
            rows.append(_row(label, stats, SEARCH_TARGET_MS, calls=calls, hits=hits, kind=kind))
    finally:
        await db.dispose()
    medians = [row.data["stats"]["median"] for row in rows]
    notes = [
        f"**Search.** One SQLite database of {total:,} memory turns (L1/L2 indexed by FTS5, "
        f"with their L3: a tool input and output on every 10th turn of the long chain, on "
        f"every turn of the short one): a chain of {len(big.sessions)} sessions of project "
        f"`{BIG_PROJECT}` with {big.turns:,} turns, and an older chain of "
        f"{len(small.sessions)} sessions of `{SMALL_PROJECT}` with {small.turns} turns, "
        "stored first. Each query is `memory_search.search` tenant-wide (as the MCP tool "
        "`memory_search` and `GET /memory/search` call it, default limit "
        f"{LIMITS.default}) in a fresh unit of work; each figure is {calls} calls after a "
        f"warm-up. Medians over every query: {min(medians):.1f} to {max(medians):.1f} ms. "
        f"Filling took {fill_s:.0f} s (not timed).",
    ]
    return rows, notes


# --- projection ----------------------------------------------------------------------------
def _seed_projected_log(engine: Any, ctx: Context) -> None:
    """A session whose log holds the turns the projection rows project (10 items each: a
    prompt, 4 Read calls with their results, the answer), none projected yet."""
    log = TaskLog(PROJECTED)
    for n in range(1, _projected_turns(ctx) + 1):
        log.chat_turn(n, items=10)
    add_sessions(engine, [_session(PROJECTED)])
    bulk_insert(engine, TABLES["items"], log.rows)


def _session(session_id: str) -> Any:
    from app.db.models import Session

    return Session(id=session_id, tenant=TENANT, project=BIG_PROJECT)


def _projected_turns(ctx: Context) -> int:
    return 2 + _pairs(ctx)


def _pairs(ctx: Context) -> int:
    return max(10, ctx.runs * 8)


async def _project(db: Database, turn: int) -> float:
    """One turn's end: its texts cleaned ahead (not timed), then its projection."""
    async with db.read() as session:
        items = await _turn_payloads(session, turn)
    cleaned = await memory.clean_ahead(items, thread_chars=Settings().memory_clean_thread_chars)
    start = time.perf_counter()
    await db.write(lambda s: memory.project_turns(s, PROJECTED, [turn], cleaned))
    return (time.perf_counter() - start) * 1000.0


async def _turn_payloads(session: AsyncSession, turn: int) -> list[Any]:
    from app.db.repositories.items import ItemRepository

    rows = await ItemRepository(session).of_turns(PROJECTED, [turn])
    return [load_payload(row.kind, row.payload) for row in rows]


async def projection_rows(ctx: Context, path: Path) -> tuple[list[Row], list[str]]:
    without = path.with_name("memory-without-index.db")
    shutil.copyfile(path, without)
    bare = database(f"sqlite:///{without}")
    indexed = database(f"sqlite:///{path}")

    async def drop(session: AsyncSession) -> None:
        for trigger in INDEX_TRIGGERS:
            await session.exec(text(f"DROP TRIGGER {trigger}"))  # type: ignore[call-overload]

    pairs = _pairs(ctx)
    on: list[float] = []
    off: list[float] = []
    try:
        await bare.write(drop)
        await _project(indexed, 1)  # warm-up: pools, statements, page caches
        await _project(bare, 1)
        for n in range(2, 2 + pairs):
            first, second = (indexed, bare) if n % 2 else (bare, indexed)
            a, b = await _project(first, n), await _project(second, n)
            (on if first is indexed else off).append(a)
            (off if first is indexed else on).append(b)
        async with indexed.read() as session:
            indexed_rows = (
                await session.exec(  # type: ignore[call-overload]
                    text("SELECT count(*) FROM memory_turns_fts WHERE memory_turns_fts MATCH 'why'")
                )
            ).scalar_one()
    finally:
        await indexed.dispose()
        await bare.dispose()
    with_index, without_index = Stats.of(on, "ms"), Stats.of(off, "ms")
    ratios = Stats.of([a / b for a, b in zip(on, off, strict=True)], "×")
    ratio = with_index.median / without_index.median
    rows = [
        _row("a turn's projection, with the full-text index", with_index, None, runs=pairs),
        _row("a turn's projection, without it", without_index, None, runs=pairs),
        Row(
            "with / without, medians",
            {"median (min–max)": f"{ratio:.2f}×"},
            ratio <= PROJECTION_TARGET,
            {"ratio": ratio, "pair_ratios": ratios.as_dict()},
        ),
    ]
    assert indexed_rows == pairs + 1, indexed_rows  # the indexed copy indexed every turn
    notes = [
        f"**Projection.** The search's database and a copy of it whose full-text triggers "
        f"(`{'`, `'.join(INDEX_TRIGGERS)}`) are dropped; a session of {pairs + 1} chat turns "
        "of 10 items (a prompt, 4 Read calls with 20-line results, the answer) is in both "
        "logs. Each figure is a turn's end as the worker writes it: "
        "`memory.project_turns` in a write unit of work, commit included (on SQLite, the "
        "writer thread), its texts cleaned ahead (`clean_ahead`, not timed). The same turn "
        f"is projected into both copies, in alternating order; {pairs} pairs after a warm-up "
        f"pair. Per pair, with / without: {ratios.cell(2)}.",
    ]
    return rows, notes


async def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, TARGET)
    path = ctx.workdir / "memory.db"
    for part in (search_rows, projection_rows):
        rows, notes = await part(ctx, path)
        section.rows += rows
        section.notes += notes
    return section
