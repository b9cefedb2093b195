"""Real processes on loopback: `strata serve` and `strata worker`, against the fake LLM.

Each test gets its own migrated database (`database_url`: a SQLite file, or a
PostgreSQL database under STRATA_TEST_DATABASE=postgresql) and starts the
processes it needs through `strata_procs`; every process is stopped at teardown, killed
if it does not stop in time. Timings are short so that leases expire within a test:
heartbeat 0.2 s, lease 1.5 s, poll 0.05 s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_WITHIN = 60.0  # a loaded 2-core machine can take long to import and migrate
STOP_WITHIN = 5.0
_ISOLATED_PREFIXES = ("STRATA_", "ANTHROPIC_")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


STRATA_FROM_SOURCE = (sys.executable, "-m", "app.cli")


class StrataProcess:
    """One `python -m app.cli …` subprocess (or another `strata` command), its output in a
    log file."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        workdir: Path,
        command: tuple[str, ...] = STRATA_FROM_SOURCE,
    ) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*command, *args],
            cwd=workdir,  # no developer `.env` is read
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> int:
        """SIGKILL: no handler runs, no lease is handed back."""
        self.signal(signal.SIGKILL)
        return self.wait(STOP_WITHIN)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after STOP_WITHIN seconds."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(STOP_WITHIN)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_WITHIN)
        self._log.close()


class StrataServer(StrataProcess):
    def __init__(
        self,
        name: str,
        env: dict[str, str],
        workdir: Path,
        command: tuple[str, ...] = STRATA_FROM_SOURCE,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(name, ["serve", "--port", str(self.port)], env, workdir, command)

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=kwargs.pop("timeout", 10.0), **kwargs)

    def wait_ready(self, within: float = READY_WITHIN) -> None:
        """Poll /readyz until it answers 200 (bounded; fails fast if the process died)."""
        deadline = time.monotonic() + within
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while True:
                if not self.alive():
                    raise AssertionError(f"{self.name} exited early:\n{self.output()}")
                with suppress(httpx.TransportError):
                    if client.get("/readyz").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name} not ready in {within} s:\n{self.output()}")
                time.sleep(0.05)


class StrataProcesses:
    """Starts servers and workers sharing one database and one fake LLM."""

    def __init__(
        self, env: dict[str, str], workdir: Path, command: tuple[str, ...] = STRATA_FROM_SOURCE
    ) -> None:
        self.env = env
        self.workdir = workdir
        self.command = command  # how `strata` is run: from the source tree unless told
        self.started: list[StrataProcess] = []

    def _env(self, overrides: dict[str, str]) -> dict[str, str]:
        return {**self.env, **overrides}

    def serve(self, *, run_worker_in_server: bool = True, **env: str) -> StrataServer:
        """`strata serve` on a free loopback port, ready when this returns."""
        overrides = {"STRATA_RUN_WORKER_IN_SERVER": str(run_worker_in_server).lower(), **env}
        server = StrataServer(
            f"serve-{len(self.started)}", self._env(overrides), self.workdir, self.command
        )
        self.started.append(server)
        server.wait_ready()
        return server

    def worker(self, name: str, **env: str) -> StrataProcess:
        """`strata worker` (it has no endpoint to poll: wait on the jobs it runs)."""
        worker = StrataProcess(
            f"worker-{name}", ["worker"], self._env(env), self.workdir, self.command
        )
        self.started.append(worker)
        return worker

    def logs(self) -> str:
        return "\n".join(f"----- {p.name} (pid {p.pid})\n{p.output()}" for p in self.started)

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()


def strata_environment(fake_url: str, database_url: str, data_dir: Path) -> dict[str, str]:
    """The environment of a `strata` process under test: this checkout's code, the given
    database and data folder, the SDK at the fake Messages API, short timings; none of the
    developer's STRATA_/ANTHROPIC_ variables."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(_ISOLATED_PREFIXES) and name != "PORT"
    }
    pythonpath = [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONUNBUFFERED": "1",
            "STRATA_DATABASE_URL": database_url,
            "STRATA_DATA_DIR": str(data_dir),
            "ANTHROPIC_BASE_URL": fake_url,
            "STRATA_LLM_TIMEOUT_SECONDS": "20",
            "STRATA_JOB_HEARTBEAT_SECONDS": "0.2",
            "STRATA_JOB_LEASE_SECONDS": "1.5",
            "STRATA_WORKER_POLL_SECONDS": "0.05",
            "STRATA_SSE_KEEPALIVE_SECONDS": "0.2",
            "STRATA_LOG_LEVEL": "info",
        }
    )
    return env


@pytest.fixture
def strata_env(fake_llm: FakeMessagesAPI, database_url: str, tmp_path: Path) -> dict[str, str]:
    return strata_environment(fake_llm.url, database_url, tmp_path / "data")


@pytest.fixture
def strata_procs(
    strata_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[StrataProcesses]:
    """Start processes with `.serve()` / `.worker(name)`; all are stopped at teardown
    (before `fake_llm` checks its script, so hung requests are closed by then)."""
    workdir = tmp_path / "procs"
    workdir.mkdir()
    procs = StrataProcesses(strata_env, workdir)
    try:
        yield procs
    finally:
        procs.stop_all()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            sys.stderr.write(procs.logs())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
