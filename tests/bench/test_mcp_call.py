"""The MCP benchmark: its quick run measures the three turns and counts the stdio starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import mcp_call
from bench.common import Context


@pytest.mark.sqlite_only  # no database of the suite's: the benchmark makes its own
def test_the_quick_run_starts_the_stdio_server_once_per_turn(tmp_path: Path) -> None:
    section = asyncio.run(mcp_call.run(Context(runs=1, quick=True, workdir=tmp_path)))

    vs_bare, vs_builtin, stdio = section.rows
    assert len(vs_bare.data["own"]["runs"]) == mcp_call.RUNS_FACTOR
    assert len(vs_builtin.data["own"]["runs"]) == mcp_call.RUNS_FACTOR
    assert vs_bare.data["calls_per_turn"] == [mcp_call.REQUESTS_PER_TURN - 1] * 3
    assert stdio.data["starts_per_turn"] == [1]
