"""The user's shapes: `strata serve` driven over HTTP as the README's clients drive it.

`bench/overhead.py` and `bench/capacity.py` measure a worker in process or a worker
process fed by the bench's own writes; a user runs `strata serve` and talks HTTP to it.
Here a real `strata serve` process (SQLite in a temporary folder, its runner in process,
an API key made with `strata keys create` as the README says, ready once `/readyz`
answers 200) runs against the bench's fake Messages API (`bench.fake_llm`, a process of
its own), and the bench is the user:

- **Own work per step.** A 120-request tool loop (the fake answers a tool call, the
  read-only `current_time`, 119 times, then a text) on a fresh session, sent as
  `POST /sessions/{id}/messages?wait=true` (both README example clients use it) and
  without `wait` (POST, then follow the session's event stream to the job's end); then
  the same two with 100 idle live streams open on other sessions. Each Strata turn is
  followed by a bare `AsyncAnthropic` loop sending the same system prompt, tools and
  growing conversation to the same fake (its first request is Strata's first, as the
  fake received it), run by run. The fake records when each request arrived and its
  answer was written; a step gap is from an answer written to the next request arrived,
  so it holds everything the client did between two calls. Own work per step is
  Strata's median gap minus the bare loop's, pair by pair. Two more `?wait=true` rows
  run the same loop on a session whose log already holds 10,000 chat items, or 10,000
  task operations, before its current segment (written into the serve process's
  database by `bench.seed`, as `bench/overhead.py` seeds its own, before the server
  starts); the segment is empty, so their requests are the fresh session's and the rows
  differ from it only in what lies before the segment.
- **CPU per one-request chat turn, its HTTP request included.** 32 clients (the runner's
  default concurrency, where the issue's figure had 200: see `CPU_CLIENTS`) each send
  one-request turns (`?wait=true`, the fake answering after 200 ms) to sessions of their
  own; the serve process's CPU (`/proc/<pid>/stat`) over the
  run divided by its turns, beside a bare SDK loop's CPU per call at the same concurrency
  sending a request of Strata's (`bench.capacity.bare_run`), right after it; with and
  without 100 idle streams. Worker CPU alone: the same with `STRATA_RUN_WORKER_IN_SERVER=
  false` and a `strata worker` process beside the server, the worker's CPU per turn.
- **An idle server with 100 streams:** its CPU over a fixed window, as a share of a core.
- **Another session's step gap while a 1 MB turn ends:** a 120-request loop runs while
  other sessions' turns, one after another, each read 1 MB of tool results (10 parallel
  `TaskList` calls on a session of 10 tasks of 10,000 characters) and end; its step gaps'
  p95 beside the same loop's alone, pair by pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.domain.jobs import TERMINAL
from app.settings import Settings
from bench import fake_llm
from bench.api_throughput import Server
from bench.capacity import bare_run
from bench.common import Context, Row, Section, Stats, cpu_seconds, step_gaps_ms
from bench.overhead import bare_turn
from bench.seed import session_with_log

NAME = "user_shapes"
TITLE = "The user's shapes: `strata serve` over HTTP beside a bare SDK loop"
LOOP_REQUESTS = 120
IDLE_STREAMS = 100
TOOL = "current_time"
LLM_SECONDS = 0.2
CPU_CLIENTS = 32
"""Clients sending one-request turns at once: `STRATA_WORKER_CONCURRENCY`'s default, so
every client's turn runs as soon as it is sent. Issue #39 speaks of 200 at once: past the
runner's 32 slots the other 168 turns would wait queued, their requests held open, and
Strata's CPU per turn would also hold that queue's work, which the bare loop beside it
(200 calls in flight, no queue) has no counterpart for."""
CPU_TURNS_PER_CLIENT = 8  # under the memory's L2 window: no turn queues a summary
IDLE_SECONDS = 10.0
BIG_CALLS = 10
BIG_TASKS = 10
BIG_DESCRIPTION = 10_000  # characters: a TaskList result of ~100 KB, 10 of them 1 MB
BIG_SESSIONS = 8  # 1 MB turns per run, one after another while a loop runs
CONTEXT_WINDOW = 1_000_000  # tokens: 1 MB of tool results is ~250k of them
# tokens the tool results of one response may hold in all (the default, 60,000, would cut
# the 10 results of ~100 KB to ~24 KB each)
RESULT_MAX_TOKENS = 300_000
SEEDED = 10_000  # log items, or task operations, before the loop's segment
TENANT = "bench"
TURN_TIMEOUT = 600.0
KEEPALIVE_SECONDS = 2.0
PAIRS = 3
OWN_WORK_MS = 1.0
CPU_RATIO = 2.0
CPU_RATIO_STREAMS = 2.2
WORKER_RATIO = 1.5
IDLE_SHARE = 0.02
GAP_P95_WITHIN = 0.20
TARGET = (
    f"Strata's own work per step ≤ {OWN_WORK_MS:g} ms on every shape; server CPU per "
    f"one-request chat turn including its HTTP request ≤ {CPU_RATIO:g}× a bare SDK call's, "
    f"≤ {CPU_RATIO_STREAMS:g}× with {IDLE_STREAMS} idle streams open; worker CPU alone ≤ "
    f"{WORKER_RATIO:g}×; an idle server with {IDLE_STREAMS} streams < {IDLE_SHARE:.0%} of a "
    f"core; another session's step gap p95 within ±{GAP_P95_WITHIN:.0%} while a turn with "
    "1 MB of tool results ends (`strata serve`, SQLite, ratios measured in one run)"
)
_SDK_KEYS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "top_k",
        "top_p",
        "stop_sequences",
        "metadata",
        "thinking",
    }
)


# --- pure helpers ---------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 < q ≤ 100): a value that was measured."""
    if not values:
        raise ValueError("no values measured")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def sdk_params(body: dict[str, Any], rename: tuple[str, str] | None = None) -> dict[str, Any]:
    """A request body as the fake received it, as `messages.stream(**params)` takes it:
    `stream` dropped (the method sets it), what the SDK has no argument for in
    `extra_body`; with `rename`, one text replaced throughout (a conversation's marker)."""
    if rename is not None:
        body = json.loads(json.dumps(body).replace(*rename))
    params = {k: v for k, v in body.items() if k in _SDK_KEYS}
    extra = {k: v for k, v in body.items() if k not in _SDK_KEYS and k != "stream"}
    return params | ({"extra_body": extra} if extra else {})


@dataclass
class Pairs:
    """Strata's figure and the yardstick's, run by run."""

    strata: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)

    def add(self, strata: float, bare: float) -> None:
        self.strata.append(strata)
        self.bare.append(bare)

    def difference(self, unit: str) -> Stats:
        return Stats.of((s - b for s, b in zip(self.strata, self.bare, strict=True)), unit)

    def ratio(self) -> Stats:
        return Stats.of((s / b for s, b in zip(self.strata, self.bare, strict=True)), "×")


def within(ratio: float, bound: float) -> bool:
    """A ratio that is 1 within ± `bound`."""
    return abs(ratio - 1.0) <= bound


# --- the server -------------------------------------------------------------------------
def database_url(workdir: Path) -> str:
    """The serve process's SQLite database, in its folder."""
    return f"sqlite:///{workdir / 'strata.db'}"


def migrated(workdir: Path) -> str:
    """The serve process's database made and migrated to head, in a new folder; its URL."""
    workdir.mkdir(parents=True)
    url = database_url(workdir)
    upgrade_to_head(url)
    return url


def _env(workdir: Path, llm_url: str, **overrides: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "ANTHROPIC_"))},
        "STRATA_DATABASE_URL": database_url(workdir),
        "STRATA_DATA_DIR": str(workdir / "data"),
        "STRATA_LOG_LEVEL": "warning",
        "STRATA_AGENT_MAX_ITERATIONS": str(LOOP_REQUESTS + 10),
        "STRATA_CONTEXT_WINDOW_TOKENS": str(CONTEXT_WINDOW),
        "STRATA_TOOL_RESULT_MAX_TOKENS": str(RESULT_MAX_TOKENS),
        "ANTHROPIC_BASE_URL": llm_url,
        "ANTHROPIC_API_KEY": "bench",
        **overrides,
    }


def create_key(env: dict[str, str], workdir: Path) -> str:
    """`strata keys create --tenant bench`: the key is the last line it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", TENANT],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Running:
    """A migrated `strata serve` (and its worker process, if apart), and a client with its key."""

    server: Server
    client: httpx.AsyncClient
    key: str
    worker_pid: int | None = None


@contextlib.contextmanager
def serving(
    workdir: Path, llm_url: str, *, worker_apart: bool = False
) -> Iterator[tuple[Server, str, int | None]]:
    """A migrated `strata serve`, ready, with a key of its own; with `worker_apart`, its
    runner off and a `strata worker` process beside it. Yields the server, the key and
    the worker's pid. The folder may hold a database seeded already."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(workdir, llm_url)
    upgrade_to_head(env["STRATA_DATABASE_URL"])
    key = create_key(env, workdir)
    if worker_apart:
        env["STRATA_RUN_WORKER_IN_SERVER"] = "false"
    command = [sys.executable, "-m", "app.cli", "serve"]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(Server("strata", command, env, workdir, "/readyz", core=None))
        worker: subprocess.Popen[bytes] | None = None
        if worker_apart:
            log = stack.enter_context((workdir / "worker.log").open("wb"))
            # the worker alone finds new jobs by polling on SQLite: poll often, as
            # bench/capacity.py's workers do, so turns do not wait on the poll
            worker_env = env | {"STRATA_WORKER_POLL_SECONDS": "0.05"}
            worker = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "worker"],
                env=worker_env,
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            stack.callback(_stop, worker)
        server.wait_ready()
        yield server, key, worker.pid if worker else None


@contextlib.asynccontextmanager
async def strata(
    workdir: Path, llm_url: str, *, worker_apart: bool = False
) -> AsyncIterator[Running]:
    with serving(workdir, llm_url, worker_apart=worker_apart) as (server, key, worker_pid):
        async with client_of(server.url, key) as client:
            yield Running(server, client, key, worker_pid)


def client_of(url: str, key: str) -> httpx.AsyncClient:
    """A client with the key. Its idle connections expire before uvicorn's keep-alive
    (5 s) closes them: a request sent on one the server is closing fails."""
    limits = httpx.Limits(
        max_connections=IDLE_STREAMS + CPU_CLIENTS + 50, keepalive_expiry=KEEPALIVE_SECONDS
    )
    return httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=TURN_TIMEOUT,
        limits=limits,
    )


def progress(what: str) -> None:
    """A line on stderr, so a long run says where it is."""
    print(f"user_shapes: {what}", file=sys.stderr, flush=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def new_session(client: httpx.AsyncClient) -> str:
    answer = await client.post("/sessions", json={"title": "bench"})
    answer.raise_for_status()
    return str(answer.json()["id"])


@contextlib.asynccontextmanager
async def idle_streams(running: Running, count: int) -> AsyncIterator[None]:
    """`count` live event streams on sessions of their own, each read to keep it flowing,
    on connections of their own; entered once every stream answered its headers."""
    sessions = await asyncio.gather(*(new_session(running.client) for _ in range(count)))
    async with client_of(running.server.url, running.key) as client:
        async with _following(client, sessions):
            yield


@contextlib.asynccontextmanager
async def _following(client: httpx.AsyncClient, sessions: Sequence[str]) -> AsyncIterator[None]:
    count = len(sessions)
    opened = 0
    all_open = asyncio.Event()

    async def follow(session_id: str) -> None:
        nonlocal opened
        async with client.stream("GET", f"/sessions/{session_id}/events") as response:
            response.raise_for_status()
            opened += 1
            if opened == count:
                all_open.set()
            async for _ in response.aiter_raw():
                pass

    tasks = [asyncio.create_task(follow(s)) for s in sessions]
    try:
        waiting = asyncio.create_task(all_open.wait())
        done, _ = await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if waiting not in done:
            for task in done:
                task.result()  # a stream that failed says why
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# --- one turn as a user sends it ---------------------------------------------------------
async def send_turn(client: httpx.AsyncClient, session_id: str, text: str, *, wait: bool) -> None:
    """One turn to its end: `?wait=true`, or the POST and the session's event stream
    followed until the job's `job.status` says it ended."""
    path = f"/sessions/{session_id}/messages"
    if wait:
        answer = await client.post(
            path, params={"wait": "true", "timeout": TURN_TIMEOUT}, json={"text": text}
        )
        if answer.status_code != 200:
            raise RuntimeError(f"turn: {answer.status_code} {answer.text[:300]}")
        return
    async with client.stream("GET", f"/sessions/{session_id}/events") as stream:
        stream.raise_for_status()
        answer = await client.post(path, json={"text": text})
        if answer.status_code != 202:
            raise RuntimeError(f"turn: {answer.status_code} {answer.text[:300]}")
        job_id = answer.json()["job_id"]
        async for line in stream.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = json.loads(line[5:])
            if data.get("type") == "job.status" and data.get("job_id") == job_id:
                if data.get("status") in TERMINAL:
                    if data["status"] != "succeeded":
                        raise RuntimeError(f"turn {job_id}: {data}")
                    return
    raise RuntimeError("the session's stream ended before the turn did")


ITEMS = "log items"
TASK_OPS = "task operations"


@dataclass(frozen=True)
class Shape:
    label: str
    wait: bool
    streams: bool
    before: str = ""  # what the session's log holds before the loop: ITEMS, TASK_OPS or none

    def session(self, seeded: int) -> str:
        """The session the loop runs on, `seeded` being the size of what its log holds."""
        return f"after {seeded:,} {self.before}" if self.before else "fresh session"


SHAPES = (
    Shape("`?wait=true`", wait=True, streams=False),
    Shape("POST, then the session's event stream", wait=False, streams=False),
    Shape("`?wait=true`", wait=True, streams=False, before=ITEMS),
    Shape("`?wait=true`", wait=True, streams=False, before=TASK_OPS),
    Shape(f"`?wait=true`, {IDLE_STREAMS} idle streams", wait=True, streams=True),
    Shape(f"POST + event stream, {IDLE_STREAMS} idle streams", wait=False, streams=True),
)


def seeds_needed(shapes: Sequence[Shape], pairs: int) -> dict[str, int]:
    """The sessions to seed before the server starts, by what their logs hold: one per
    pair of each shape that runs on one (a loop leaves its session longer than seeded)."""
    needed: dict[str, int] = {}
    for shape in shapes:
        if shape.before:
            needed[shape.before] = needed.get(shape.before, 0) + pairs
    return needed


async def seed_sessions(workdir: Path, needed: dict[str, int], size: int) -> dict[str, list[str]]:
    """The serve process's database, migrated, with `needed` sessions of the tenant's
    whose logs hold `size` chat items (ITEMS) or `size` task operations (TASK_OPS), all
    in compacted segments, the current one empty; written as `bench/overhead.py` writes
    its sessions (`bench.seed`), before the server starts."""
    url = migrated(workdir)
    database = Database(Settings(_env_file=None, database_url=url, data_dir=workdir / "data"))
    seeded: dict[str, list[str]] = {}
    try:
        for before, count in needed.items():
            items, task_ops = (size, 0) if before == ITEMS else (0, size)
            seeded[before] = [
                await session_with_log(database, items, 0, task_ops, tenant=TENANT)
                for _ in range(count)
            ]
    finally:
        await database.dispose()
    return seeded


class Names:
    """Conversation names, unique in the fake's run."""

    def __init__(self) -> None:
        self._n = 0

    def __call__(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"


async def loop_pair(
    running: Running,
    fake: fake_llm.FakeLLM,
    names: Names,
    shape: Shape,
    requests: int,
    session_id: str | None = None,
) -> tuple[float, float]:
    """Strata's loop of `requests` requests on `session_id` (a fresh session if none),
    then the bare loop's sending what Strata first sent: both median step gaps, ms."""
    name, bare = names("s"), names("b")
    if session_id is None:
        session_id = await new_session(running.client)
    fake.take_conversations()
    text = f"Work through it. {fake_llm.marker(name, loop=requests)}"
    await send_turn(running.client, session_id, text, wait=shape.wait)
    exchanges, first = fake.take_conversations()
    strata_gaps = step_gaps_ms(exchanges[name])
    if len(strata_gaps) != requests - 1:
        raise RuntimeError(f"Strata's loop made {len(strata_gaps) + 1} requests, not {requests}")
    rename = (fake_llm.marker(name, loop=requests), fake_llm.marker(bare, loop=requests))
    await bare_turn(fake.url, sdk_params(first[name], rename), requests)
    exchanges, _ = fake.take_conversations()
    return statistics.median(strata_gaps), statistics.median(step_gaps_ms(exchanges[bare]))


# --- CPU per one-request turn --------------------------------------------------------
@dataclass(frozen=True)
class CpuRun:
    turns: int
    server_s: float
    worker_s: float
    bare_ms: float  # the bare loop's CPU per call, right after

    @property
    def server_ms(self) -> float:
        return self.server_s * 1000 / self.turns

    @property
    def worker_ms(self) -> float:
        return self.worker_s * 1000 / self.turns


async def one_request_turns(running: Running, clients: int, per_client: int) -> tuple[float, float]:
    """`clients` clients, each `per_client` one-request turns on a session of its own,
    `?wait=true`; the server's and the worker process's CPU seconds over them."""
    client = running.client
    sessions = await asyncio.gather(*(new_session(client) for _ in range(clients)))
    pids = (running.server.pid, running.worker_pid)
    before = [cpu_seconds(p) if p else 0.0 for p in pids]

    async def lane(session_id: str) -> None:
        for n in range(per_client):
            await send_turn(client, session_id, f"Turn {n}. {fake_llm.ONE_REQUEST}", wait=True)

    await asyncio.gather(*(lane(s) for s in sessions))
    after = [cpu_seconds(p) if p else 0.0 for p in pids]
    return after[0] - before[0], after[1] - before[1]


async def cpu_pair(running: Running, fake: fake_llm.FakeLLM, per_client: int) -> CpuRun:
    fake.take_typical_request()  # forget what came before
    server_s, worker_s = await one_request_turns(running, CPU_CLIENTS, per_client)
    request = fake.take_typical_request()
    if request is None:
        raise RuntimeError("no request of Strata's turns reached the fake")
    turns = CPU_CLIENTS * per_client
    bare = await bare_run(fake.url, CPU_CLIENTS, turns, request)
    return CpuRun(turns, server_s, worker_s, bare.cpu_ms_per_turn)


# --- another session's gaps while 1 MB turns end ------------------------------------------
async def big_session(client: httpx.AsyncClient) -> str:
    """A session of BIG_TASKS tasks of BIG_DESCRIPTION characters: a TaskList of ~100 KB."""
    session_id = await new_session(client)
    for n in range(BIG_TASKS):
        body = {
            "subject": f"Part {n}",
            "description": f"{n} " + "lorem ipsum " * (BIG_DESCRIPTION // 12),
        }
        (await client.post(f"/sessions/{session_id}/tasks", json=body)).raise_for_status()
    return session_id


def gaps_within(exchanges: Sequence[tuple[float, float]], start: float, end: float) -> list[float]:
    """The step gaps (ms) of one conversation that overlap the moments `start`…`end`
    (seconds of the same clock as the exchanges')."""
    ordered = sorted(exchanges)
    return [
        (arrived - answered) * 1000.0
        for (_, answered), (arrived, _) in itertools.pairwise(ordered)
        if arrived >= start and answered <= end
    ]


async def gaps_beside_big_turns(
    running: Running, fake: fake_llm.FakeLLM, names: Names, requests: int, *, big: bool
) -> tuple[float, int, int]:
    """A loop's step gap p95 (ms): while 1 MB turns of other sessions end one after
    another (`big`: the gaps overlapping them), or of the loop alone (all its gaps); with
    how many 1 MB turns ended and how many gaps the p95 is of.

    The moments are `time.perf_counter()`'s, in this process and the fake's alike: on
    Linux both read CLOCK_MONOTONIC, one clock for the machine."""
    client = running.client
    ready = [await big_session(client) for _ in range(BIG_SESSIONS)] if big else []
    name = names("g")
    session_id = await new_session(client)
    fake.take_conversations()
    loop = asyncio.create_task(
        send_turn(client, session_id, fake_llm.marker(name, loop=requests), wait=True)
    )
    ended = 0
    started = time.perf_counter()
    for other in ready:
        if loop.done():
            break
        calls = fake_llm.marker(names("x"), calls=BIG_CALLS, tool="TaskList")
        await send_turn(client, other, f"Read the list. {calls}", wait=True)
        ended += 1
    finished = time.perf_counter()
    await loop
    exchanges, _ = fake.take_conversations()
    gaps = gaps_within(exchanges[name], started, finished) if big else step_gaps_ms(exchanges[name])
    return percentile(gaps, 95), ended, len(gaps)


# --- the section -----------------------------------------------------------------------
async def run(ctx: Context) -> Section:
    started = time.monotonic()
    # the pairs are not the report's runs per figure: with 100 idle streams today's loop
    # of 120 requests took ~40 s on a busy machine, and three pairs per row suffice
    pairs = ctx.scale(PAIRS, 1)
    requests = ctx.scale(LOOP_REQUESTS, 30)
    per_client = ctx.scale(CPU_TURNS_PER_CLIENT, 2)
    cpu_pairs = ctx.scale(PAIRS, 1)
    idle_seconds = ctx.scale(int(IDLE_SECONDS), 2)
    seeded_size = ctx.scale(SEEDED, 1_000)
    gaps = {shape: Pairs() for shape in SHAPES}
    cpu: dict[str, list[CpuRun]] = {"plain": [], "streams": [], "apart": []}
    big_with: list[float] = []
    big_alone: list[float] = []
    big_ended: list[int] = []
    big_gaps: list[int] = []
    idle_share = 0.0
    names = Names()
    progress("seeding")
    seeded = await seed_sessions(ctx.workdir / "serve", seeds_needed(SHAPES, pairs), seeded_size)
    with fake_llm.running(delay=LLM_SECONDS, tool=TOOL) as fake:
        async with strata(ctx.workdir / "serve", fake.url) as running:
            # warm-up: imports, statement caches, connections, the bare loop's too
            await loop_pair(running, fake, names, SHAPES[0], min(requests, 20))
            await cpu_pair(running, fake, 1)
            progress("warmed up")
            for streams in (False, True):
                async with contextlib.AsyncExitStack() as stack:
                    if streams:
                        await stack.enter_async_context(idle_streams(running, IDLE_STREAMS))
                        before, at = running.server.cpu_seconds(), time.monotonic()
                        await asyncio.sleep(idle_seconds)  # the fixed window measured
                        idle_share = (running.server.cpu_seconds() - before) / (
                            time.monotonic() - at
                        )
                    progress(f"loops and CPU per turn, streams: {streams}")
                    shapes = [s for s in SHAPES if s.streams == streams]
                    for _ in range(pairs):
                        for shape in shapes:
                            session = seeded[shape.before].pop() if shape.before else None
                            gaps[shape].add(
                                *await loop_pair(running, fake, names, shape, requests, session)
                            )
                    for _ in range(cpu_pairs):
                        cpu["streams" if streams else "plain"].append(
                            await cpu_pair(running, fake, per_client)
                        )
            progress("1 MB turns")
            for _ in range(pairs):
                alone, _, _ = await gaps_beside_big_turns(running, fake, names, requests, big=False)
                with_big, ended, measured = await gaps_beside_big_turns(
                    running, fake, names, requests, big=True
                )
                big_alone.append(alone)
                big_with.append(with_big)
                big_ended.append(ended)
                big_gaps.append(measured)
        progress("worker apart")
        async with strata(ctx.workdir / "apart", fake.url, worker_apart=True) as running:
            await cpu_pair(running, fake, 1)
            for _ in range(cpu_pairs):
                cpu["apart"].append(await cpu_pair(running, fake, per_client))
    section = Section(NAME, TITLE, TARGET)
    for shape in SHAPES:
        section.rows.append(gap_row(f"{shape.session(seeded_size)} · {shape.label}", gaps[shape]))
    section.rows += cpu_rows(cpu)
    section.rows.append(
        Row(
            f"idle server, {IDLE_STREAMS} streams open, no turns",
            {"Strata": f"{idle_share:.1%} of a core over {idle_seconds} s"},
            idle_share < IDLE_SHARE,
            {"share_of_a_core": idle_share, "seconds": idle_seconds},
        )
    )
    section.rows.append(big_row(big_alone, big_with, big_ended, big_gaps))
    section.notes += notes(
        pairs,
        requests,
        cpu_pairs,
        per_client,
        idle_seconds,
        seeded_size,
        time.monotonic() - started,
    )
    return section


def gap_row(label: str, pairs: Pairs) -> Row:
    strata_gap, bare_gap = Stats.of(pairs.strata, "ms"), Stats.of(pairs.bare, "ms")
    own = pairs.difference("ms")
    return Row(
        f"{LOOP_REQUESTS}-step tool loop, {label}",
        {
            "Strata": strata_gap.cell(),
            "bare SDK loop": bare_gap.cell(),
            "Strata's own work (difference)": own.cell(),
            "ratio": pairs.ratio().cell(),
        },
        own.median <= OWN_WORK_MS,
        {
            "strata_gap": strata_gap.as_dict(),
            "bare_gap": bare_gap.as_dict(),
            "own_work": own.as_dict(),
            "ratio": pairs.ratio().as_dict(),
        },
    )


def cpu_rows(cpu: dict[str, list[CpuRun]]) -> list[Row]:
    rows = []
    shapes = (
        ("plain", "server CPU per one-request turn, its POST included", CPU_RATIO, "server"),
        (
            "streams",
            f"the same, {IDLE_STREAMS} idle streams open",
            CPU_RATIO_STREAMS,
            "server",
        ),
        (
            "apart",
            "worker CPU alone per turn (`strata worker` beside the server)",
            WORKER_RATIO,
            "worker",
        ),
    )
    for key, label, bound, which in shapes:
        runs = cpu[key]
        if not runs:
            continue
        pairs = Pairs()
        for r in runs:
            pairs.add(r.worker_ms if which == "worker" else r.server_ms, r.bare_ms)
        cells = {
            "Strata": Stats.of(pairs.strata, "ms").cell(),
            "bare SDK loop": Stats.of(pairs.bare, "ms").cell(),
            "ratio": pairs.ratio().cell(),
        }
        if key == "apart":
            cells["serve process beside the worker"] = Stats.of(
                (r.server_ms for r in runs), "ms"
            ).cell()
        ratio = pairs.ratio()
        rows.append(
            Row(
                label,
                cells,
                ratio.median <= bound,
                {
                    "strata_cpu_ms": Stats.of(pairs.strata, "ms").as_dict(),
                    "bare_cpu_ms": Stats.of(pairs.bare, "ms").as_dict(),
                    "ratio": ratio.as_dict(),
                    "server_cpu_ms": [r.server_ms for r in runs],
                    "turns": runs[0].turns,
                },
            )
        )
    return rows


def big_row(alone: list[float], with_big: list[float], ended: list[int], gaps: list[int]) -> Row:
    pairs = Pairs(with_big, alone)
    ratio = pairs.ratio()
    return Row(
        "another session's step gap p95 while 1 MB turns end",
        {
            "Strata": f"{Stats.of(with_big, 'ms').cell()} ({min(ended)}–{max(ended)} "
            f"1 MB turns ended, over {min(gaps)}–{max(gaps)} of the loop's gaps)",
            "bare SDK loop": f"the same loop alone: {Stats.of(alone, 'ms').cell()}",
            "ratio": ratio.cell(),
        },
        within(ratio.median, GAP_P95_WITHIN),
        {
            "p95_with_ms": with_big,
            "p95_alone_ms": alone,
            "ratio": ratio.as_dict(),
            "big_turns_ended": ended,
            "gaps_measured": gaps,
        },
    )


def notes(
    pairs: int,
    requests: int,
    cpu_pairs: int,
    per_client: int,
    idle_seconds: int,
    seeded: int,
    took: float,
) -> list[str]:
    turns = CPU_CLIENTS * per_client
    return [
        f"**Own work per step.** {pairs} pair(s) per row, Strata's turn then the bare loop's, "
        "the shapes taking turns pair by pair; a run's figure is the median of its "
        f"{requests - 1} step gaps (the fake's clock: answer written → next request "
        "arrived), a cell the median (min–max) of the runs, the difference and ratio taken "
        "pair by pair. The bare loop (`bench/overhead.py`'s) sends Strata's first request as "
        "the fake received it, streams each answer, and answers each tool call with the "
        "current time, as `current_time` does. The rows with streams run with "
        f"{IDLE_STREAMS} live `GET /sessions/{{id}}/events` streams open on other, idle "
        "sessions, read by the bench. One warm-up pair first, not counted.",
        f"**After {seeded:,} log items, after {seeded:,} task operations.** The same "
        "`?wait=true` loop, taking turns with the fresh session's pair by pair, each run on "
        "a session of its own seeded before the server started (`bench.seed`, as "
        f"`bench/overhead.py` seeds its sessions): its log holds {seeded:,} chat items "
        "(turns of question, tool call, tool result, answer) in four compacted segments, "
        f"or {seeded:,} task operations (TaskCreate / TaskUpdate results and REST task "
        "events, the task list rebuilt from them) in one, and its current segment is empty, "
        "as a newly opened one is. Its requests are then the fresh session's: a step that "
        "reads the log, or rebuilds the task list from it, shows in the difference.",
        f"**CPU per turn.** {cpu_pairs} pair(s) per row of {turns} one-request turns "
        f"({CPU_CLIENTS} clients × {per_client}, `?wait=true`, the fake answering after "
        f"{LLM_SECONDS * 1000:.0f} ms), then the bare loop's {turns} calls at "
        f"{CPU_CLIENTS} concurrent, each sending a request of Strata's run of median "
        "length (`bench/capacity.py`'s `bare_run`). Strata's figure is the serve "
        "process's CPU time (user + system) over the run per turn: the HTTP request, the "
        "wait, the runner, the database, the events; the bare loop's, its process's CPU "
        "per call. The clients are the runner's default concurrency, "
        f"{CPU_CLIENTS}, not the 200 issue #39 speaks of: past the runner's slots the "
        "other turns would wait queued with their requests open, and Strata's figure would "
        "hold that queue's work, which the bare loop beside it has no counterpart for. "
        "Worker alone: `strata serve` with "
        "`STRATA_RUN_WORKER_IN_SERVER=false` and one `strata worker` process (polling "
        "every 50 ms, as on SQLite it learns of new jobs only so), the worker's CPU per "
        "turn; the server's beside it is given too.",
        f"**Idle.** The serve process's CPU time over a {idle_seconds} s window with "
        f"{IDLE_STREAMS} streams open and no turn, over the window's wall time.",
        "**1 MB turns.** The same loop's step gap p95 (nearest rank) over its gaps that "
        f"overlap {BIG_SESSIONS} other sessions' turns run one after another (fewer if "
        f"the loop ends first), each {BIG_CALLS} parallel `TaskList` calls on a "
        f"session of {BIG_TASKS} tasks of {BIG_DESCRIPTION:,} characters (1 MB of tool "
        "results, logged, projected into memory at the turn's end, and sent back in the "
        "turn's second request), beside the p95 of all the loop's gaps when it runs alone, "
        "pair by pair; the target is the "
        f"ratio within 1 ± {GAP_P95_WITHIN:g}. `STRATA_CONTEXT_WINDOW_TOKENS` is "
        f"{CONTEXT_WINDOW:,} on this server (1 MB of text is ~250k tokens) and "
        f"`STRATA_TOOL_RESULT_MAX_TOKENS` {RESULT_MAX_TOKENS:,} (at the default 60,000 "
        "the ten results of one response would share ~240 KB).",
        "**Server.** `strata serve` on a migrated SQLite database in a temporary folder, "
        "one API key from `strata keys create --tenant bench` sent as a bearer token, "
        "`STRATA_LOG_LEVEL=warning`, "
        f"`STRATA_AGENT_MAX_ITERATIONS={LOOP_REQUESTS + 10}`, the two settings above, all "
        "else default; not pinned "
        "to a core. The fake, the server and this process (client and bare loop) share the "
        "machine's cores with whatever else runs: figures are ratios taken run by run.",
        f"This section took {took:.0f} s.",
    ]


# --- a subset, run alone ------------------------------------------------------------------
async def subset(what: str, pairs: int, workdir: Path) -> None:
    """One shape's figures printed pair by pair, nothing written: `cpu` (the CPU row, its
    POST included), `wait` (the fresh session's loop with `?wait=true`) or `stream` (the
    same, POST then the event stream), each loop with the serve process's CPU per step:
    to profile a change (`py-spy record --pid` on the pid printed) without the section's
    other rows, `python -m bench.user_shapes cpu --pairs 2`."""
    names = Names()
    with fake_llm.running(delay=LLM_SECONDS, tool=TOOL) as fake:
        async with strata(workdir / "serve", fake.url) as running:
            await loop_pair(running, fake, names, SHAPES[0], 20)  # warm-up, as in `run`
            await cpu_pair(running, fake, 1)
            progress(f"warmed up; the serve process is pid {running.server.pid}")
            for _ in range(pairs):
                if what == "cpu":
                    cpu = await cpu_pair(running, fake, CPU_TURNS_PER_CLIENT)
                    print(
                        f"server CPU per turn {cpu.server_ms:.2f} ms, bare {cpu.bare_ms:.2f} "
                        f"ms: {cpu.server_ms / cpu.bare_ms:.2f}×",
                        flush=True,
                    )
                    continue
                shape = SHAPES[0] if what == "wait" else SHAPES[1]
                before = running.server.cpu_seconds()
                strata_gap, bare_gap = await loop_pair(running, fake, names, shape, LOOP_REQUESTS)
                per_step = (running.server.cpu_seconds() - before) * 1000 / LOOP_REQUESTS
                print(
                    f"{shape.label}: step gap {strata_gap:.2f} ms, bare {bare_gap:.2f} ms, "
                    f"own work {strata_gap - bare_gap:.2f} ms; server CPU per step "
                    f"{per_step:.2f} ms",
                    flush=True,
                )


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="One of the user's shapes, run alone.")
    parser.add_argument("what", choices=("cpu", "wait", "stream"))
    parser.add_argument("--pairs", type=int, default=PAIRS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-user-shapes-") as tmp:
        asyncio.run(subset(args.what, args.pairs, Path(tmp)))
