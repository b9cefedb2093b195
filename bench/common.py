"""What every benchmark shares: repeated runs, their statistics, and the report's shape.

A benchmark module exposes `NAME`, `TITLE` and `run(ctx) -> Section`. Every figure is
measured several times (`ctx.runs`) and reported as min / median / max; every
comparison is a ratio of two things measured side by side in the same run.
"""

from __future__ import annotations

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
