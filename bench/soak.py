"""Soak: the server's memory over many chat turns, which must level off.

`strata serve` as deployed (SQLite, its runner in process) answers TURNS one-request chat
turns, sent CLIENTS at a time round robin over SESSIONS sessions, against the fake
Messages API in a process of its own (answering at once). The server's resident memory
(VmRSS, `/proc/<pid>/status`) is read at CHECKPOINTS evenly spaced points of the run; the
first, after the first stretch of turns, is the baseline (imports, pools and caches warm).

Every session's log grows by two items a turn, and nothing here reaches the context
window, so no segment is ever compacted: whatever the server keeps per session or per
turn grows with the run unless it is bounded. Past the memory's L2 window (20 turns) each
turn's end also queues an L1 summary job, which the same fake answers: the server runs
about two jobs a turn. The headline is how much the second half of
the run grew the server, as a share of its size at the half. The same run is repeated
with the one bound that matters here lifted (`STRATA_JOB_SESSION_CACHE_ITEMS`, the items
the session pictures a turn leaves for the next hold in all), side by side: what that
bound is worth.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from app.db.migrate import upgrade_to_head
from app.settings import Settings
from bench import fake_llm
from bench.api_throughput import Server
from bench.common import Context, Row, Section

NAME = "soak"
TITLE = "Soak: server memory over many turns"
# the second half of the run grows the server's RSS by at most this share of its size
MAX_SECOND_HALF_GROWTH = 0.02
TURNS = 6000
QUICK_TURNS = 400
SESSIONS = 50
CLIENTS = 8  # STRATA_TENANT_MAX_CONCURRENT_HEAVY: one tenant waits on 8 turns at most
CHECKPOINTS = 8
TURN_TIMEOUT_SECONDS = 120.0
UNBOUNDED = 10**9
TARGET = (
    f"Over {TURNS:,} one-request chat turns on {SESSIONS} sessions, the server's RSS levels "
    f"off: the second half of the run grows it by at most {MAX_SECOND_HALF_GROWTH:.0%}."
)


def rss_mib(pid: int) -> float:
    """The resident memory of a live process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@contextlib.contextmanager
def server(workdir: Path, llm_url: str, overrides: dict[str, str]) -> Iterator[Server]:
    """`strata serve` on a fresh migrated SQLite database, pointed at the fake."""
    workdir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{workdir / 'strata.db'}"
    upgrade_to_head(url)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))},
        "STRATA_DATABASE_URL": url,
        "STRATA_DATA_DIR": str(workdir / "data"),
        "STRATA_LOG_LEVEL": "warning",
        "STRATA_LLM_MAX_RETRIES": "0",
        "STRATA_WORKER_POLL_SECONDS": "0.05",
        "ANTHROPIC_BASE_URL": llm_url,
        "ANTHROPIC_API_KEY": "bench",
        **overrides,
    }
    command = [sys.executable, "-m", "app.cli", "serve"]
    with Server("strata", command, env, workdir, "/readyz") as running:
        running.wait_ready()
        yield running


async def soak(base_url: str, pid: int, turns: int) -> list[tuple[int, float]]:
    """Run `turns` turns; (turns done, RSS MiB) at each checkpoint."""
    timeout = httpx.Timeout(TURN_TIMEOUT_SECONDS)
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout) as client:
        sessions = [(await client.post("/sessions", json={})).json()["id"] for _ in range(SESSIONS)]
        every = turns // CHECKPOINTS
        points: list[tuple[int, float]] = []
        done = 0
        next_point = every

        async def one(n: int) -> None:
            session_id = sessions[n % SESSIONS]
            answer = await client.post(
                f"/sessions/{session_id}/messages",
                params={"wait": "true", "timeout": TURN_TIMEOUT_SECONDS},
                json={"text": f"Turn {n}: just answer."},
            )
            if answer.status_code != 200:
                raise RuntimeError(f"turn {n}: {answer.status_code} {answer.text[:200]}")

        while done < turns:
            # a batch at a time, each client on sessions of its own (a session's turns queue)
            batch = range(done, min(done + CLIENTS, turns))
            await asyncio.gather(*(one(n) for n in batch))
            done = batch[-1] + 1
            if done >= next_point or done == turns:
                points.append((done, rss_mib(pid)))
                next_point += every
    return points


def growth(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(MiB grown since the first checkpoint, MiB grown over the second half, that as a
    share of the RSS at the half)."""
    first, last = points[0][1], points[-1][1]
    half = points[len(points) // 2 - 1][1]
    return last - first, last - half, (last - half) / half


def row(label: str, points: list[tuple[int, float]], seconds: float, target: bool) -> Row:
    total, second_half, share = growth(points)
    return Row(
        label,
        {
            "RSS at checkpoints, MiB (turns)": ", ".join(f"{m:.1f} ({n:,})" for n, m in points),
            "growth since the first": f"{total:+.1f} MiB",
            "second half": f"{second_half:+.1f} MiB ({share:+.1%})",
            "turns/s": f"{points[-1][0] / seconds:.1f}",
        },
        share <= MAX_SECOND_HALF_GROWTH if target else None,
        {"points": points, "seconds": seconds, "second_half_share": share},
    )


async def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, TARGET)
    turns = ctx.scale(TURNS, QUICK_TURNS)
    configurations = [
        ("default settings", {}, True),
        (
            f"`STRATA_JOB_SESSION_CACHE_ITEMS={UNBOUNDED:.0e}` (pictures unbounded)",
            {"STRATA_JOB_SESSION_CACHE_ITEMS": str(UNBOUNDED)},
            False,
        ),
    ]
    with fake_llm.running() as fake:
        for n, (label, overrides, target) in enumerate(configurations):
            with server(ctx.workdir / f"run{n}", fake.url, overrides) as strata:
                started = time.monotonic()
                points = await soak(strata.url, strata.pid, turns)
                section.rows.append(row(label, points, time.monotonic() - started, target))
    default_items = Settings.model_fields["job_session_cache_items"].default
    section.notes = [
        f"{turns:,} turns, {CLIENTS} at a time, round robin over {SESSIONS} sessions (each "
        f"session's turns run one after another); RSS read after every {turns // CHECKPOINTS:,} "
        "turns. The fake answers each request at once with a short text, so the server's own "
        "work is all there is; SQLite, `strata serve` with its runner in process.",
        "**What grows without a bound.** A chat turn leaves its session's segment (items, and "
        "the request messages built from them) for the session's next turn "
        "(`app.services.session_view`); a segment grows by every turn's items until it is "
        "compacted. "
        "Bounded by entries alone (`STRATA_JOB_SESSION_CACHE_ENTRIES`, 1,000), the pictures "
        f"of {SESSIONS} sessions grew with every turn. `STRATA_JOB_SESSION_CACHE_ITEMS` "
        f"(default {default_items:,}) bounds the items they hold in all; the second row lifts it.",
        "**What is left is the allocator's.** Traced through 4,800 turns (the same shape, a hook "
        "reading the server every 400 turns): Python's live data grew 91.6 → 103.8 MiB until the "
        "pictures' bound filled (about 2,800 turns) and then stayed at 104.0–104.3 MiB; SQLite's "
        "own memory stayed at 2.2–4.9 MiB and its cached statements at 258–262. What RSS gains "
        "after the bound fills is memory glibc keeps after it is freed and pymalloc's pools "
        "fragmenting (`malloc_trim(0)` gave back 1.2–4.4 MiB at each checkpoint), not data the "
        "server holds.",
    ]
    return section
