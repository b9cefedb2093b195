"""MCP tools in a chat turn: Strata's own work per call of a tool on a Streamable HTTP MCP
server on loopback, beyond the server's own time; and a stdio server started once per job.

Timed, as `overhead` is, from the fake Messages API's side: the step gap, an answer written
→ the next request arrived. The fake (`bench.fake_llm`, a process of its own) answers every
request of a chat turn (an in-process runner, `REQUESTS_PER_TURN` requests, a session
whose segment holds `SEGMENT` items) with one call of the suite's fault server's
`read_clock` (no input, annotated read-only; the server is registered `trusted`, so its
call runs without a person's approval). The fault server (`tests.mcp.fault_server`)
serves Streamable HTTP on a loopback port in a process of its own, as any tenant's server
would. Taking turns run by run, on fresh copies of one database:

* **Strata, MCP**: the turn calling `mcp__faults__read_clock` through the job's connection;
* **Strata, builtin**: the same turn in a session without the server, calling the builtin
  `current_time` (its own cost is a few µs);
* **bare MCP loop**: an `AsyncAnthropic` streaming loop sending what Strata sent first,
  answering each call with the `mcp` SDK's own `Client` calling the same tool on the same
  server (connected once, as a job's connection is), each call timed: the server's time per
  call as a bare SDK client sees it (loopback, the SDK's encoding, the server's work).

Strata's own work per MCP call is taken two ways, run by run: the MCP turn's step gap
minus the bare MCP loop's (everything Strata does in a step, the call included, beyond
what a bare SDK agent loop calling the same server does), and the MCP turn's gap minus
the builtin turn's minus the bare SDK call's time (what an MCP call adds to a step beyond
the server's time: the registry, the call's span, the SDK call through Strata's
connection, rendering and budgeting its result). Both are also taken in CPU time of
this process (the bench's turns and loops run in it; the fake and the server do not), which
a loaded machine disturbs far less than the gaps. Connecting to the server and listing its
tools happen once, before a turn's first request (the segment's tool list), so no gap
holds them.

A **stdio** server (the same fault server, declared in `STRATA_MCP_SERVERS_FILE`, started
under the Bash tool's confinement) is started on first use and kept for the job: a turn
making `REQUESTS_PER_TURN - 1` calls of its tool counts the server processes Strata
started (every `McpConnection.start` of a stdio server in this process launches one), how
long that start took, and the turn's step gap.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Session
from app.db.repositories.rows import RowRepository
from app.mcp.client import McpConnection, StdioServer
from app.services.mcp_servers import ServerFields, create_server
from app.settings import Settings
from bench import fake_llm
from bench.common import ROOT, Context, Row, Section, Stats, step_gaps_ms
from bench.overhead import in_turns, strata_turn
from bench.seed import TENANT, session_with_log

SERVER = "faults"
SERVER_TOOL = "read_clock"
TOOL = f"mcp__{SERVER}__{SERVER_TOOL}"
BUILTIN = "current_time"
REQUESTS_PER_TURN = 12
SEGMENT = 100
TARGET_MS = 2.0
RUNS_FACTOR = 3
"""Runs per figure here, as a multiple of the report's: a run's median gap moves by
~0.1 ms from run to run, and a run of the three turns takes a second or two."""


class StartCounter:
    """Every start of a stdio server's connection in this process, and how long each
    took: each launches one server process (`McpPool` starts one per job and server)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._original: Any = None

    def install(self) -> None:
        original = McpConnection.start
        self._original = original
        counter = self

        async def counted(connection: McpConnection) -> None:
            begin = time.perf_counter()
            await original(connection)
            if isinstance(connection.server, StdioServer):
                counter.seconds.append(time.perf_counter() - begin)

        McpConnection.start = counted  # type: ignore[method-assign, assignment]

    def uninstall(self) -> None:
        if self._original is not None:
            McpConnection.start = self._original  # type: ignore[method-assign]

    def take(self) -> list[float]:
        taken, self.seconds = self.seconds, []
        return taken


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    url: str


@contextmanager
def fault_server() -> Iterator[HttpServer]:
    """The fault server on a loopback port (it prints the port once it listens)."""
    command = [sys.executable, "-m", "tests.mcp.fault_server", "http"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            port = int(process.stdout.readline())
            yield HttpServer(process, f"http://127.0.0.1:{port}/mcp")
        finally:
            process.kill()
            process.wait()


def servers_file(workdir: Path) -> Path:
    """The operator's file declaring the fault server over stdio, under the same name."""
    readable = sorted({str(ROOT), sys.base_prefix, sys.prefix, str(Path(sys.prefix).resolve())})
    servers = {
        SERVER: {
            "command": sys.executable,
            "args": ["-m", "tests.mcp.fault_server", "stdio"],
            "env": {"PYTHONPATH": str(ROOT)},
            "paths": readable,
        }
    }
    path = workdir / "mcp-servers.json"
    path.write_text(json.dumps(servers), encoding="utf-8")
    return path


def _settings(url: str, db: Path, data_dir: Path, servers: Path | None = None) -> Settings:
    return Settings(
        _env_file=None,
        database_url=f"sqlite:///{db}",
        data_dir=data_dir,
        anthropic_base_url=url,
        anthropic_api_key="bench",
        llm_max_retries=0,
        agent_max_iterations=REQUESTS_PER_TURN,
        mcp_allow_private=True,  # the server is on loopback
        mcp_servers_file=servers,
    )


async def _template(workdir: Path, name: str, server_url: str | None, attach: bool) -> Path:
    """A database holding one session of `SEGMENT` items; with `server_url`, the tenant's
    server registered (trusted); with `attach`, the session attaching `SERVER`'s tool."""
    path = workdir / f"{name}.db"
    url = f"sqlite:///{path}"
    upgrade_to_head(url)
    settings = Settings(_env_file=None, database_url=url, data_dir=workdir)
    database = Database(settings)
    try:
        session_id = await session_with_log(database, SEGMENT, SEGMENT)

        async def prepare(db: AsyncSession) -> None:
            if server_url is not None:
                fields = ServerFields(url=server_url, trusted=True)
                await create_server(db, settings, TENANT, SERVER, fields)
            if attach:
                row = await RowRepository(db).by_id(Session, session_id)
                assert row is not None
                row.mcp = [{"server": SERVER, "tools": [SERVER_TOOL]}]
                await RowRepository(db).save(row)

        await database.write(prepare)
    finally:
        await database.dispose()
    (workdir / f"{name}.session").write_text(session_id, encoding="ascii")
    return path


def _text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content or ())


@dataclass
class BareTurn:
    """What the bare loop's turn measured, in ms: each call's time and CPU time, and
    this process's CPU time as each request started."""

    calls_ms: list[float] = field(default_factory=list)
    calls_cpu_ms: list[float] = field(default_factory=list)
    cpu_at_request: list[float] = field(default_factory=list)


def cpu_per_step_ms(cpu_at_request: list[float]) -> float:
    """This process's CPU time from a turn's first request to its last, per step, in ms
    (`cpu_at_request` in seconds)."""
    return (cpu_at_request[-1] - cpu_at_request[0]) / (len(cpu_at_request) - 1) * 1000.0


async def bare_mcp_turn(
    base_url: str, params: dict[str, Any], requests: int, client: Any
) -> BareTurn:
    """The yardstick: an SDK agent loop that answers each tool call with the `mcp` SDK's
    `Client` calling the server's tool, and nothing more."""
    params = copy.deepcopy(params)
    messages: list[dict[str, Any]] = params["messages"]
    turn = BareTurn()
    async with anthropic.AsyncAnthropic(api_key="bench", base_url=base_url, max_retries=0) as llm:
        for request in range(1, requests + 1):
            turn.cpu_at_request.append(time.process_time())
            async with llm.messages.stream(**params) as stream:
                async for _event in stream:
                    pass
                message = await stream.get_final_message()
            calls = [block for block in message.content if block.type == "tool_use"]
            if not calls or request == requests:  # the last answer's calls go unanswered
                break
            content = [block.model_dump(exclude_none=True) for block in message.content]
            messages.append({"role": "assistant", "content": content})
            results = []
            for call in calls:
                begin, cpu = time.perf_counter(), time.process_time()
                answer = await client.call_tool(SERVER_TOOL, {})
                turn.calls_ms.append((time.perf_counter() - begin) * 1000.0)
                turn.calls_cpu_ms.append((time.process_time() - cpu) * 1000.0)
                results.append(
                    {"type": "tool_result", "tool_use_id": call.id, "content": _text_of(answer)}
                )
            messages.append({"role": "user", "content": results})
    return turn


@dataclass
class _Runs:
    """Each run's figures, in ms: a turn's median step gap and its CPU time per step."""

    gap: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    stdio_starts: list[int] = field(default_factory=list)
    stdio_start_ms: list[float] = field(default_factory=list)
    calls_per_turn: list[int] = field(default_factory=list)

    def add(self, name: str, gap: float, cpu: float) -> None:
        self.gap.setdefault(name, []).append(gap)
        self.cpu.setdefault(name, []).append(cpu)


def _median(values: list[float]) -> float:
    return Stats.of(values, "ms").median


async def run(ctx: Context) -> Section:
    from mcp import Client

    section = Section(
        name="mcp_call",
        title="MCP tools: Strata's own work per call, and a stdio server's start",
        target=(
            f"a chat turn calling a tool of a Streamable HTTP MCP server on loopback: "
            f"Strata's own work per call, beyond the server's time, ≤ {TARGET_MS:g} ms "
            "(median of the step gaps' difference and of the CPU time's; beside a bare SDK "
            "loop calling the same server, and beside a builtin tool's turn plus a bare SDK "
            "call); a stdio server started once per job, not per call"
        ),
    )
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    workdir = ctx.workdir
    data = workdir / "data"
    servers = servers_file(workdir)
    starts = StartCounter()
    starts.install()
    runs = _Runs()
    try:
        with fault_server() as http:
            templates = {
                "mcp": await _template(workdir, "mcp", http.url, attach=True),
                "builtin": await _template(workdir, "builtin", None, attach=False),
                "stdio": await _template(workdir, "stdio", None, attach=True),
            }
            sessions = {
                name: (workdir / f"{name}.session").read_text(encoding="ascii")
                for name in templates
            }
            with (
                fake_llm.running(delay=0.0, tool=TOOL) as fake_mcp,
                fake_llm.running(delay=0.0, tool=BUILTIN) as fake_builtin,
            ):
                async with Client(http.url) as client:

                    async def turn(
                        name: str, fake: fake_llm.FakeLLM
                    ) -> tuple[tuple[float, float], Any]:
                        db = workdir / "run.db"
                        shutil.copyfile(templates[name], db)
                        file = servers if name == "stdio" else None
                        settings = _settings(fake.url, db, data, file)
                        fake.take_exchanges()
                        llm, _ = await strata_turn(settings, sessions[name], "Go on.")
                        gaps = step_gaps_ms(fake.take_exchanges())
                        db.unlink()
                        assert len(gaps) == REQUESTS_PER_TURN - 1, "the turn stopped early"
                        return (_median(gaps), cpu_per_step_ms(llm.cpu_at_request)), llm.first

                    async def one(kind: str, record: bool) -> None:
                        if kind == "mcp":
                            (gap, cpu), first = await turn("mcp", fake_mcp)
                            assert first is not None
                            fake_mcp.take_exchanges()
                            bare = await bare_mcp_turn(
                                fake_mcp.url, first, REQUESTS_PER_TURN, client
                            )
                            bare_gap = _median(step_gaps_ms(fake_mcp.take_exchanges()))
                            if record:
                                runs.add("mcp", gap, cpu)
                                runs.add("bare", bare_gap, cpu_per_step_ms(bare.cpu_at_request))
                                runs.add("call", _median(bare.calls_ms), _median(bare.calls_cpu_ms))
                                runs.calls_per_turn.append(len(bare.calls_ms))
                        elif kind == "builtin":
                            (gap, cpu), _ = await turn("builtin", fake_builtin)
                            if record:
                                runs.add("builtin", gap, cpu)
                        else:
                            starts.take()
                            (gap, cpu), _ = await turn("stdio", fake_mcp)
                            taken = starts.take()
                            if record:
                                runs.add("stdio", gap, cpu)
                                runs.stdio_starts.append(len(taken))
                                runs.stdio_start_ms.extend(s * 1000.0 for s in taken)

                    for kind in ("mcp", "builtin", "stdio"):  # warm-up, discarded
                        await one(kind, record=False)
                    for run_no, kind in in_turns(
                        ("mcp", "builtin", "stdio"), RUNS_FACTOR * ctx.runs
                    ):
                        if kind != "stdio" or run_no < ctx.runs:
                            await one(kind, record=True)
    finally:
        starts.uninstall()
    _rows(section, runs)
    calls = REQUESTS_PER_TURN - 1
    section.notes.append(
        f"{RUNS_FACTOR * ctx.runs} runs of the HTTP turns ({RUNS_FACTOR}× the report's runs "
        f"per figure), {ctx.runs} of the stdio turn, taking turns run by run on fresh copies "
        f"of one database (a segment of {SEGMENT} items). Each turn makes {REQUESTS_PER_TURN} "
        f"requests, every answer a call, so {calls} calls a turn; a run's figure is the median "
        "of its step gaps as the fake saw them (answer written → next request arrived), and "
        "a difference is taken run by run. The bare loop sends what Strata's MCP turn sent "
        "first (the same system prompt, tools and conversation) and answers each call with "
        "the `mcp` SDK's `Client` on one connection to the same server; its calls' median "
        "time is the server's time per call (loopback, the SDK, the server's work). One "
        "warm-up run of each turn is discarded."
    )
    section.notes.append(
        "**CPU** is this process's CPU time (every thread: the runner, the database's) from "
        "a turn's first request to its last, per step; the bare SDK call's is the CPU time "
        "of its `call_tool`. The fake, the MCP server and whatever else runs are other "
        "processes: on a loaded machine the CPU figures swing far less than the step gaps, "
        "which can swing by tens of ms, though sharing the cores inflates them too; a row "
        "meets the target when both its medians do."
    )
    section.notes.append(
        "Connecting to a server and listing its tools happen once per turn's job, before its "
        "first request (the segment's tool list), so no step gap holds them. The stdio "
        "server runs under the Bash tool's confinement (bubblewrap where it works); its "
        "start is counted and timed in process (each `McpConnection.start` of a stdio "
        "server launches one process)."
    )
    section.notes.append(
        f"The machine's load average (1 min) was {load_before:.1f} when the section started "
        f"and {os.getloadavg()[0]:.1f} when it ended, on {os.cpu_count()} cores: a load above "
        "the cores means other work shared them, which widens every min–max; the turns "
        "taking turns share it alike."
    )
    section.notes.append(f"This section took {time.monotonic() - started:.0f} s.")
    for name in ("mcp", "builtin", "stdio"):
        (workdir / f"{name}.db").unlink(missing_ok=True)
    shutil.rmtree(data, ignore_errors=True)
    return section


def _stats(values: list[float]) -> Stats:
    return Stats.of(values, "ms")


def _minus(a: list[float], *others: list[float]) -> Stats:
    """`a` minus each of `others`, run by run."""
    return _stats([x - sum(rest) for x, *rest in zip(a, *others, strict=True)])


def _rows(section: Section, runs: _Runs) -> None:
    gap, cpu = runs.gap, runs.cpu
    own_gap = _minus(gap["mcp"], gap["bare"])
    own_cpu = _minus(cpu["mcp"], cpu["bare"])
    section.rows.append(
        Row(
            label="HTTP MCP tool, beside a bare SDK loop calling the same server",
            cells={
                "Strata's step gap": _stats(gap["mcp"]).cell(),
                "beside it": f"bare MCP loop {_stats(gap['bare']).cell()}",
                "own work per call (gap)": own_gap.cell(),
                "Strata's CPU per step": _stats(cpu["mcp"]).cell(),
                "beside it (CPU)": f"bare MCP loop {_stats(cpu['bare']).cell()}",
                "own CPU per call": own_cpu.cell(),
            },
            meets=own_gap.median <= TARGET_MS and own_cpu.median <= TARGET_MS,
            data={
                "strata_gap": _stats(gap["mcp"]).as_dict(),
                "bare_gap": _stats(gap["bare"]).as_dict(),
                "own": own_gap.as_dict(),
                "strata_cpu": _stats(cpu["mcp"]).as_dict(),
                "bare_cpu": _stats(cpu["bare"]).as_dict(),
                "own_cpu": own_cpu.as_dict(),
                "calls_per_turn": runs.calls_per_turn,
            },
        )
    )
    own_gap = _minus(gap["mcp"], gap["builtin"], gap["call"])
    own_cpu = _minus(cpu["mcp"], cpu["builtin"], cpu["call"])
    section.rows.append(
        Row(
            label="HTTP MCP tool, beside the builtin tool's turn plus a bare SDK call",
            cells={
                "Strata's step gap": _stats(gap["mcp"]).cell(),
                "beside it": (
                    f"`{BUILTIN}` {_stats(gap['builtin']).cell()} + call "
                    f"{_stats(gap['call']).cell()}"
                ),
                "own work per call (gap)": own_gap.cell(),
                "Strata's CPU per step": _stats(cpu["mcp"]).cell(),
                "beside it (CPU)": (
                    f"`{BUILTIN}` {_stats(cpu['builtin']).cell()} + call "
                    f"{_stats(cpu['call']).cell()}"
                ),
                "own CPU per call": own_cpu.cell(),
            },
            meets=own_gap.median <= TARGET_MS and own_cpu.median <= TARGET_MS,
            data={
                "strata_gap": _stats(gap["mcp"]).as_dict(),
                "builtin_gap": _stats(gap["builtin"]).as_dict(),
                "bare_call": _stats(gap["call"]).as_dict(),
                "own": own_gap.as_dict(),
                "builtin_cpu": _stats(cpu["builtin"]).as_dict(),
                "bare_call_cpu": _stats(cpu["call"]).as_dict(),
                "own_cpu": own_cpu.as_dict(),
            },
        )
    )
    starts = runs.stdio_starts
    start_ms = _stats(runs.stdio_start_ms)
    section.rows.append(
        Row(
            label=f"stdio server, a turn of {REQUESTS_PER_TURN - 1} calls",
            cells={
                "Strata's step gap": _stats(gap["stdio"]).cell(),
                "beside it": f"its start {start_ms.cell(0)}",
                "Strata's CPU per step": _stats(cpu["stdio"]).cell(),
                "server processes started per turn": (
                    str(starts[0]) if min(starts) == max(starts) else f"{min(starts)}–{max(starts)}"
                ),
            },
            meets=all(count == 1 for count in starts),
            data={
                "strata_gap": _stats(gap["stdio"]).as_dict(),
                "strata_cpu": _stats(cpu["stdio"]).as_dict(),
                "start": start_ms.as_dict(),
                "starts_per_turn": starts,
            },
        )
    )
