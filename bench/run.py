"""`make bench`: run every benchmark, each in a fresh process, and write bench/RESULTS.md.

    python -m bench.run                 # everything, the reported run
    python -m bench.run --quick         # small sizes, to check the benchmarks themselves
    python -m bench.run --only replay   # one benchmark (results.json keeps the others)

Each benchmark runs in its own interpreter so that one's caches, garbage and
threads never flavour the next one's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib
import inspect
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, ROOT, Context, Section

BENCHMARKS = (
    "overhead",
    "capacity",
    "api_throughput",
    "replay",
    "memory_search",
    "branching",
    "memory_economy",
    "prompt_cache",
    "soak",
    "user_shapes",
    "tool_policy",
    "mcp_call",
)
RESULTS_JSON = BENCH_DIR / "results.json"
RESULTS_MD = BENCH_DIR / "RESULTS.md"


def _run_one(name: str, runs: int, quick: bool, out: Path) -> None:
    module = importlib.import_module(f"bench.{name}")
    with tempfile.TemporaryDirectory(prefix=f"strata-bench-{name}-") as tmp:
        ctx = Context(runs=runs, quick=quick, workdir=Path(tmp))
        result = module.run(ctx)
        section: Section = asyncio.run(result) if inspect.iscoroutine(result) else result
    out.write_text(json.dumps({"section": section.as_dict(), "markdown": section.markdown()}))


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return f"{pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        return "unknown"


def machine() -> dict[str, str]:
    commit = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores, {_memory_gib()}",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


HEADER = """# Strata benchmark results

Written by `make bench` (`python -m bench.run`); do not edit by hand. Each figure is
the median of several runs with the minimum and maximum in brackets; every ratio
compares two things measured side by side in the same run. How each figure is
measured is in the module named in its section (`bench/<name>.py`), with the date
and commit it was measured at (a benchmark rerun alone with `--only` keeps the others'
figures, and says so). The table below is the last run's.
"""


def render(meta: dict[str, str], runs: int, sections: dict[str, Any]) -> str:
    lines = [HEADER, "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in meta.items()]
    lines += [f"| runs per figure | {runs} |", ""]
    for name in BENCHMARKS:
        if name in sections:
            section = sections[name]
            when = section.get("measured", meta)
            source = f"*Source: `bench/{name}.py`; measured {when['date']} at {when['commit']}.*"
            lines += [section["markdown"], source, ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes; nothing is written")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="one benchmark")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        _run_one(args.child, args.runs, args.quick, args.out)
        return 0

    names = args.only or list(BENCHMARKS)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}
    sections: dict[str, Any] = dict(previous.get("sections", {})) if args.only else {}
    for kept in sections.values():  # kept from a run that said when only once, for all
        kept.setdefault("measured", previous.get("meta", {}))
    now = machine()
    measured = {"date": now["date"], "commit": now["commit"]}
    started = time.monotonic()
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="strata-bench-") as tmp:
        for name in names:
            out = Path(tmp) / f"{name}.json"
            print(f"bench: {name} …", flush=True)
            t0 = time.monotonic()
            command = [sys.executable, "-m", "bench.run", "--child", name, "--out", str(out)]
            command += ["--runs", str(args.runs)] + (["--quick"] if args.quick else [])
            if subprocess.run(command, cwd=ROOT).returncode != 0 or not out.exists():
                failed.append(name)
                continue
            sections[name] = json.loads(out.read_text()) | {"measured": measured}
            print(sections[name]["markdown"])
            print(f"bench: {name} took {time.monotonic() - t0:.0f} s", flush=True)
    print(f"bench: all done in {time.monotonic() - started:.0f} s", flush=True)
    if args.quick:
        return 1 if failed else 0
    meta = machine()
    RESULTS_JSON.write_text(
        json.dumps({"meta": meta, "runs": args.runs, "sections": sections}, indent=1)
    )
    RESULTS_MD.write_text(render(meta, args.runs, sections))
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
