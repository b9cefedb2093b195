"""Bash's confinement: limits everywhere, and bubblewrap's file system view.

Bash must not read files outside the workspace, nor list other tenants' job folders or the
database next to them. These tests put such neighbours next to the workspace and look
for them from inside. The bubblewrap ones need `bwrap` (the Makefile installs it); they
are skipped, saying so, only where it is genuinely absent or cannot sandbox here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from app.engine.tools import ToolContext, ToolRegistry
from app.engine.workspace import Workspace
from app.tools.sandbox import Confinement, bwrap_works
from app.tools.workspace import workspace_tools

needs_bwrap = pytest.mark.skipif(
    not bwrap_works(), reason="bubblewrap (bwrap) is not installed or cannot sandbox here"
)


@pytest.fixture
def neighbours(tmp_path: Path) -> Workspace:
    """A job folder between another tenant's job and the database, as on a server."""
    data = tmp_path / "data"
    (data / "workspaces" / "job_other" / "output").mkdir(parents=True)
    (data / "workspaces" / "job_other" / "output" / "theirs.txt").write_text("OTHER TENANT\n")
    (data / "strata.db").write_text("DATABASE FILE\n")
    workspace = Workspace(data / "workspaces" / "job_mine")
    workspace.ensure_layout()
    (workspace.root / "input" / "mine.txt").write_text("MINE\n")
    return workspace


async def bash(ws: Workspace, command: str, confinement: Confinement | None = None) -> str:
    tools = workspace_tools(
        bash_enabled=True, bash_timeout_seconds=20, confinement=confinement or Confinement()
    )
    registry = ToolRegistry(tools)
    ctx = ToolContext(tenant="t", session_id="s", job_id="j", workspace=ws)
    output = await registry.run(ctx, "Bash", {"command": command}, ["Bash"], "toolu_1")
    return output.content


async def test_every_command_runs_under_its_resource_limits(neighbours: Workspace) -> None:
    limits = Confinement(
        cpu_seconds=7, memory_bytes=512 * 1024**2, file_size_bytes=1024**2, max_processes=99
    )

    out = await bash(neighbours, "cat /proc/self/limits", limits)

    soft = {line[:26].strip(): line[26:].split()[0] for line in out.splitlines()[1:-1]}
    assert soft["Max cpu time"] == "7"
    assert soft["Max address space"] == str(512 * 1024**2)
    assert soft["Max file size"] == str(1024**2)
    assert soft["Max processes"] == "99"


async def test_a_file_larger_than_the_limit_cannot_be_written(neighbours: Workspace) -> None:
    limits = Confinement(file_size_bytes=64 * 1024)

    out = await bash(neighbours, "head -c 1000000 /dev/zero > output/big; echo $?", limits)

    assert (neighbours.root / "output" / "big").stat().st_size <= 64 * 1024
    assert out.splitlines()[-2] != "0"  # the write failed (SIGXFSZ)


@needs_bwrap
async def test_with_bwrap_the_command_sees_only_the_job_folder(neighbours: Workspace) -> None:
    mine = await bash(neighbours, "cat input/mine.txt")
    parent = await bash(neighbours, "ls -a ..")
    theirs = await bash(
        neighbours,
        f"cat ../job_other/output/theirs.txt {neighbours.root.parent}/job_other/output/theirs.txt",
    )
    database = await bash(neighbours, f"cat ../../strata.db {neighbours.root.parents[1]}/strata.db")
    top = await bash(neighbours, "ls /")

    assert mine.startswith("MINE\n")
    assert "job_other" not in parent and "job_mine" not in parent
    assert "OTHER TENANT" not in theirs and "No such file" in theirs
    assert "DATABASE FILE" not in database and "No such file" in database
    root_listing = set(top.splitlines()[:-1])
    assert "workspace" in root_listing
    assert not root_listing & {"work", "root", "home", "data", "opt", "srv", "mnt", "tmp_path"}


@needs_bwrap
async def test_with_bwrap_the_command_has_no_network_and_no_capabilities(
    neighbours: Workspace,
) -> None:
    out = await bash(neighbours, "cat /proc/net/dev | tail -n +3; grep CapEff /proc/self/status")

    lines = out.splitlines()[:-1]
    interfaces = [line.split(":")[0].strip() for line in lines if not line.startswith("CapEff")]
    assert interfaces in ([], ["lo"])
    assert "CapEff:\t0000000000000000" in out


def test_a_command_dies_with_the_server_that_started_it(tmp_path: Path) -> None:
    """A Bash child dies with its worker: it never finishes its work after the worker died."""
    root = tmp_path / "job"
    root.mkdir()

    _crash_mid_command(root, "echo started > started; sleep 3; touch side-effect", "auto")

    assert not (root / "side-effect").exists()


def test_without_bwrap_a_crash_also_kills_what_the_command_put_in_the_background(
    tmp_path: Path,
) -> None:
    """Without bwrap the parent-death signal reached only the process the launcher
    exec'd: a server killed mid-command left the command's background subshell running,
    and its side effect happened after the crash."""
    root = tmp_path / "job"
    root.mkdir()

    _crash_mid_command(root, "(sleep 1; touch side-effect) & echo started > started; wait", "none")

    time.sleep(1.5)  # past the moment the side effect was due
    assert not (root / "side-effect").exists()


def _crash_mid_command(root: Path, command: str, sandbox: str) -> None:
    """Start `command` from a server process, SIGKILL that process once the command has
    written `started`, and wait until every process below the server is gone."""
    script = textwrap.dedent(
        f"""
        import asyncio, pathlib, sys
        from app.tools.sandbox import Confinement, run_confined
        async def main():
            await run_confined(
                ["/bin/sh", "-c", {command!r}],
                root=pathlib.Path({str(root)!r}),
                limit_seconds=30,
                confinement=Confinement(sandbox={sandbox!r}),
            )
        asyncio.run(main())
        """
    )
    server = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 20
        while not (root / "started").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.02)
        children = _descendants(server.pid)
        assert children
        os.kill(server.pid, signal.SIGKILL)  # the server crashes mid-command
        server.wait()
        deadline = time.monotonic() + 10
        while alive := [pid for pid in children if _alive(pid)]:
            assert time.monotonic() < deadline, f"still running after the crash: {alive}"
            time.sleep(0.02)
    finally:
        if server.poll() is None:
            server.kill()


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
                todo.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
