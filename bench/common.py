"""What every benchmark shares: repeated runs, their statistics, and the report's shape.

A benchmark module exposes `NAME`, `TITLE` and `run(ctx) -> Section`. Every figure is
measured several times (`ctx.runs`) and reported as min / median / max; every
comparison is a ratio of two things measured side by side in the same run.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


@dataclass(frozen=True)
class Stats:
    """min / median / max of several runs of one measurement (in `unit`)."""

    values: tuple[float, ...]
    unit: str

    @classmethod
    def of(cls, values: Iterable[float], unit: str) -> Stats:
        vals = tuple(values)
        if not vals:
            raise ValueError("no values measured")
        return cls(vals, unit)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    def cell(self, digits: int = 2) -> str:
        """`median (min–max) unit`, the form every table uses."""
        f = f"{{:.{digits}f}}"
        return f"{f.format(self.median)} ({f.format(self.min)}–{f.format(self.max)}) {self.unit}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "min": self.min,
            "median": self.median,
            "max": self.max,
            "runs": list(self.values),
        }


@dataclass
class Row:
    """One line of a section's table: a label, its cells, and whether it meets the target."""

    label: str
    cells: dict[str, str]
    meets: bool | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    name: str
    title: str
    target: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"## {self.title}", "", f"**Target:** {self.target}", ""]
        if self.rows:
            columns = list(dict.fromkeys(c for row in self.rows for c in row.cells))
            lines.append("| | " + " | ".join(columns) + " | target met |")
            lines.append("|---" * (len(columns) + 2) + "|")
            for row in self.rows:
                met = {True: "yes", False: "**no**", None: "—"}[row.meets]
                cells = " | ".join(row.cells.get(c, "") for c in columns)
                lines.append(f"| {row.label} | {cells} | {met} |")
            lines.append("")
        lines.extend(f"{note}\n" for note in self.notes)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "target": self.target,
            "rows": [
                {"label": r.label, "cells": r.cells, "meets": r.meets, "data": r.data}
                for r in self.rows
            ],
            "notes": self.notes,
        }


@dataclass
class Context:
    """What the runner hands every benchmark."""

    runs: int
    quick: bool
    workdir: Path

    def scale(self, full: int, quick: int) -> int:
        """Sizes shrink under `--quick` (a smoke run), never in a reported run."""
        return quick if self.quick else full


def measure(runs: int, fn: Callable[[], float]) -> list[float]:
    """Call `fn` `runs` times; it returns the figure of one run."""
    return [fn() for _ in range(runs)]


async def ameasure(runs: int, fn: Callable[[], Awaitable[float]]) -> list[float]:
    return [await fn() for _ in range(runs)]


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


# --- database work, counted in process ----------------------------------------------------
@dataclass(frozen=True)
class DbCounts:
    """Transactions, statements and thread hand-offs of some database work.

    These do not depend on load or on the machine, so they explain a timing where the
    timing itself is noisy: a step's cost follows them."""

    transactions: int = 0
    statements: int = 0
    handoffs: int = 0

    def __sub__(self, other: DbCounts) -> DbCounts:
        return DbCounts(
            self.transactions - other.transactions,
            self.statements - other.statements,
            self.handoffs - other.handoffs,
        )

    def per(self, n: int) -> tuple[float, float, float]:
        return (self.transactions / n, self.statements / n, self.handoffs / n)

    def cell(self, n: int = 1) -> str:
        t, s, h = self.per(n)
        return f"{t:.1f} tx · {s:.1f} stmt · {h:.1f} hand-offs"

    def as_dict(self, n: int = 1) -> dict[str, float]:
        t, s, h = self.per(n)
        return {"transactions": t, "statements": s, "handoffs": h}


class HandoffCounter:
    """Counts what `Database.stats` cannot see: reads go through aiosqlite on the event
    loop, and every aiosqlite call (connect, execute, fetch, commit, close…) passes
    through `aiosqlite.core.Connection._execute`, which hands the call to the
    connection's thread and waits for the answer. Like the writer's count (2 per write
    unit), each such call counts as 2 hand-offs: there and back. Opening a connection
    does not pass there and is not counted (the engine's pool keeps connections open).

    Installed for the whole bench process (`install()`); `total` only grows."""

    total = 0
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        import aiosqlite.core

        original: Any = aiosqlite.core.Connection._execute

        async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            cls.total += 2
            return await original(self, fn, *args, **kwargs)

        aiosqlite.core.Connection._execute = counted  # type: ignore[method-assign]
        cls._installed = True


def db_counts(stats: Any) -> DbCounts:
    """Now's counts: a `DbStats`' (both engines, the writer's hand-offs) plus aiosqlite's
    hand-offs in this process (`HandoffCounter`, which must be installed)."""
    return DbCounts(stats.transactions, stats.statements, stats.handoffs + HandoffCounter.total)


# --- the fake LLM's view of a turn ----------------------------------------------------------
def step_gaps_ms(exchanges: Iterable[tuple[float, float]]) -> list[float]:
    """The gaps between one answer written and the next request arrived, in ms.

    `exchanges` are one sequential conversation's (request arrived, answer written)
    moments in seconds, as the fake LLM saw them. Each gap is everything the client did
    between two LLM calls: reading and parsing the answer, its own work, building and
    sending the next request. Measured on the fake's side, it does not depend on the
    client's own clock points, so Strata and a bare SDK loop are timed alike."""
    ordered = sorted(exchanges)
    gaps = []
    for (_, answered), (arrived, _) in itertools.pairwise(ordered):
        if arrived < answered:
            raise ValueError("the requests overlap: not one sequential conversation")
        gaps.append((arrived - answered) * 1000.0)
    return gaps


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (any of ours), from /proc: what a
    request or a turn costs that process, whatever else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
