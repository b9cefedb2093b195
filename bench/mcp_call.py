"""What an MCP tool call costs Strata beyond its server: a call through the turn's tool
registry beside the same call made directly on the SDK's client, on loopback.

The suite's fault server (`tests.mcp.fault_server`) serves Streamable HTTP on a loopback
port in a process of its own; one connection is opened and held, as a job holds it. Both
sides call its `echo` tool `CALLS` times, taking turns round by round (the machine's
speed drifts); the figure is each side's median per call and their difference, Strata's
own work per call: argument validation, the call's span, rendering the result and
cutting it to its budget. A stdio server's start (once per job, on first use) is timed
apart, beside a call on the started connection.

Run: `.venv/bin/python -m bench.mcp_call` (after `make mcp-tools`).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from app.engine.tools import ToolContext, ToolRegistry
from app.mcp.catalog import offered
from app.mcp.client import McpConnection, RemoteServer, StdioServer, Timeouts
from app.mcp.names import ToolFilter
from app.mcp.pool import McpPool, ServerSource
from app.mcp.tools import mcp_tool
from app.tools.sandbox import Confinement

CALLS = 200
ROUNDS = 5
TIMEOUTS = Timeouts(connect=30.0, call=30.0)


async def _http(port: int) -> dict[str, float]:
    server = RemoteServer("faults", f"http://127.0.0.1:{port}/mcp")
    source = ServerSource("faults", TIMEOUTS, remote=server)
    pool = McpPool(Confinement())
    connection = await pool.connection(source)
    tools = offered("faults", await connection.list_tools(), ToolFilter(), ("echo",))
    registry = ToolRegistry([mcp_tool(tools[0], source, pool)])
    ctx = ToolContext(tenant="t", session_id="s", job_id="j", result_tokens=60_000)
    direct: list[float] = []
    strata: list[float] = []
    for _ in range(ROUNDS):
        for _ in range(CALLS):
            start = time.perf_counter()
            await connection.call_tool("echo", {"text": "hello"})
            direct.append(time.perf_counter() - start)
            start = time.perf_counter()
            await registry.run(ctx, tools[0].name, {"text": "hello"}, [tools[0].name], "tu")
            strata.append(time.perf_counter() - start)
    await pool.close()
    d, s = statistics.median(direct), statistics.median(strata)
    return {"direct_ms": d * 1e3, "strata_ms": s * 1e3, "own_ms": (s - d) * 1e3}


async def _stdio() -> dict[str, float]:
    spec = StdioServer(
        "faults",
        (sys.executable, "-m", "tests.mcp.fault_server", "stdio"),
        {"PATH": "/usr/bin:/bin"},
        cwd=Path.cwd(),
    )
    start = time.perf_counter()
    connection = McpConnection(spec, TIMEOUTS)
    await connection.start()
    started = time.perf_counter() - start
    calls = []
    for _ in range(CALLS):
        begin = time.perf_counter()
        await connection.call_tool("echo", {"text": "hello"})
        calls.append(time.perf_counter() - begin)
    await connection.close()
    return {"start_ms": started * 1e3, "call_ms": statistics.median(calls) * 1e3}


def main() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.fault_server", "http"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    try:
        port = int(process.stdout.readline())
        http = asyncio.run(_http(port))
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
    stdio = asyncio.run(_stdio())
    sys.stdout.write(
        f"HTTP call: direct {http['direct_ms']:.3f} ms, through the registry "
        f"{http['strata_ms']:.3f} ms, Strata's own {http['own_ms']:.3f} ms per call\n"
        f"stdio: start {stdio['start_ms']:.0f} ms once per job, then {stdio['call_ms']:.3f} ms "
        "per call\n"
    )


if __name__ == "__main__":
    main()
