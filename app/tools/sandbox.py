"""Running a command confined to a job's folder: what every Bash command runs under.

Every command gets, whatever the machine:

* the job folder as its working directory and HOME, stdin closed, and a scrubbed
  environment (PATH=/usr/bin:/bin, LANG=C.UTF-8, nothing of the server's: no API keys,
  no STRATA_* settings);
* resource limits set before it starts: CPU seconds, address space, the largest file it
  may write, and processes (RLIMIT_NPROC counts every process of the user, and the
  kernel does not apply it to root);
* its own process group, killed whole when the command ends, times out or is cancelled,
  or when the server dies: the launcher stays alive as the group's leader, and the
  parent-death signal it asked for makes it kill the whole group (a parent-death signal
  reaches only the one process that asked for it, so an exec'd command's background
  children would outlive a crashed server). A process that leaves the group (`setsid`)
  escapes both kills unless bwrap confines it.

Where bubblewrap (`bwrap`) works, the command also runs in its own namespaces: it sees
the system's programs and libraries read-only, a private /tmp and /dev, the job folder
(as `/workspace`) and nothing else of the file system, has no network unless enabled,
holds no capabilities, and dies with its whole process tree when Strata stops it.
Without bwrap, the command can read what the server's user can read (docs/jobs-and-pieces.md).

The limits are applied by a tiny launcher (`python -I -S -c …`), because `preexec_fn` is
unsafe in a threaded server: it forks the command, sets them in the child before the exec,
waits, and ends as the command ended (its exit code, or the same signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.settings import Settings

logger = logging.getLogger("strata.sandbox")

MINIMAL_PATH = "/usr/bin:/bin"
SANDBOX_ROOT = "/workspace"
# Bytes of output kept from the start and from the end; the middle of a runaway output
# is dropped while reading, so memory stays bounded whatever the command prints.
_CAPTURE_BYTES = 2 * 1024 * 1024
_DRAIN_AFTER_KILL_SECONDS = 2.0
_POLL_SECONDS = 0.05

_LAUNCHER = """
import ctypes, os, resource, signal, sys
ppid, cpu, mem, fsize, nproc = (int(v) for v in sys.argv[1:6])
pidfile = os.environ.pop("STRATA_LAUNCHER_PIDFILE", None)
if pidfile:  # where its caller learns the group's id (an MCP server's connection)
    with open(pidfile, "w") as out:
        out.write(str(os.getpid()))
def kill_all(*_):
    os.killpg(0, signal.SIGKILL)  # the whole group, this launcher last
signal.signal(signal.SIGTERM, kill_all)
ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != ppid:
    kill_all()
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Python ignores SIGPIPE and SIGXFSZ; a shell and its commands expect the defaults
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    for which, value, extra in (
        (resource.RLIMIT_CPU, cpu, 1),
        (resource.RLIMIT_AS, mem, 0),
        (resource.RLIMIT_FSIZE, fsize, 0),
        (resource.RLIMIT_NPROC, nproc, 0),
    ):
        if value > 0:
            resource.setrlimit(which, (value, value + extra))
    try:
        os.execv(sys.argv[6], sys.argv[6:])
    finally:
        os._exit(127)
status = os.waitpid(child, 0)[1]
if os.WIFSIGNALED(status):  # end the same way, so the server sees the same signal
    number = os.WTERMSIG(status)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        signal.signal(number, signal.SIG_DFL)  # SIGKILL's cannot be changed, nor needs to
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), number)
    os._exit(128 + number)
os._exit(os.waitstatus_to_exitcode(status))
"""

# What a confined command sees of /etc: the loader's cache, users, alternatives (awk,
# editors), time zones and certificates; never the server's own configuration.
_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "ssl",
    "ca-certificates",
    "hosts",
    "resolv.conf",
)
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

SandboxMode = Literal["auto", "bwrap", "none"]


@dataclass(frozen=True)
class Confinement:
    """The limits of one confined command (0 leaves a limit unset)."""

    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024**3
    file_size_bytes: int = 256 * 1024**2
    max_processes: int = 256
    sandbox: SandboxMode = "auto"
    network: bool = False

    @classmethod
    def of(cls, settings: Settings) -> Confinement:
        """What every Bash command runs under."""
        return cls(
            cpu_seconds=settings.bash_cpu_seconds,
            memory_bytes=settings.bash_memory_bytes,
            file_size_bytes=settings.bash_file_size_bytes,
            max_processes=settings.bash_max_processes,
            sandbox=settings.bash_sandbox,
            network=settings.bash_network,
        )


@dataclass(frozen=True)
class CommandResult:
    output: str
    exit_code: int | None  # None when it timed out
    timed_out: bool
    sandboxed: bool


class SandboxUnavailable(RuntimeError):
    """`sandbox: bwrap` was asked for and bwrap does not work here."""


@functools.cache
def bwrap_works() -> bool:
    """Whether bwrap exists and can make its namespaces here (a container may forbid it)."""
    path = shutil.which("bwrap")
    if path is None:
        return False
    probe = [path, *_bwrap_arguments(Path("/"), network=False, bind_job=False), "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:
        logger.warning("bwrap is installed but cannot sandbox here: %s", done.stderr[:200])
    return done.returncode == 0


def uses_bwrap(confinement: Confinement) -> bool:
    if confinement.sandbox == "none":
        return False
    if bwrap_works():
        return True
    if confinement.sandbox == "bwrap":
        raise SandboxUnavailable("STRATA_BASH_SANDBOX=bwrap, but bwrap does not work here")
    return False


def _bwrap_arguments(
    root: Path, *, network: bool, bind_job: bool = True, read_only: Sequence[Path] = ()
) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    args += ["--ro-bind", "/usr", "/usr"]
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in read_only:
        args += ["--ro-bind-try", str(path), str(path)]
    if bind_job:
        args += ["--bind", str(root), SANDBOX_ROOT, "--chdir", SANDBOX_ROOT]
    return args


def environment(home: str) -> dict[str, str]:
    return {"PATH": MINIMAL_PATH, "HOME": home, "LANG": "C.UTF-8"}


def command_line(
    argv: Sequence[str], root: Path, confinement: Confinement, read_only: Sequence[Path] = ()
) -> tuple[list[str], str]:
    """The full command line (launcher, bwrap when used, the command) and the folder the
    command sees as its own; `read_only`: folders a bwrap-confined command may also read
    (an MCP server's installation)."""
    inner = list(argv)
    home = str(root)
    if uses_bwrap(confinement):
        bwrap = shutil.which("bwrap")
        assert bwrap is not None
        bound = _bwrap_arguments(root, network=confinement.network, read_only=read_only)
        inner = [bwrap, *bound, *inner]
        home = SANDBOX_ROOT
    elif not os.path.isabs(inner[0]):
        inner[0] = shutil.which(inner[0], path=MINIMAL_PATH) or inner[0]
    limits = (
        confinement.cpu_seconds,
        confinement.memory_bytes,
        confinement.file_size_bytes,
        confinement.max_processes,
    )
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid())]
    return [*launcher, *(str(v) for v in limits), *inner], home


class _Capture:
    def __init__(self, limit: int = _CAPTURE_BYTES) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.limit
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        if not self.dropped:
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        return (
            self.head.decode("utf-8", "replace")
            + f"\n[… {self.dropped} bytes of output dropped while reading …]\n"
            + self.tail.decode("utf-8", "replace")
        )


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def run_confined(
    argv: Sequence[str], *, root: Path, limit_seconds: float, confinement: Confinement
) -> CommandResult:
    """Run `argv` confined to `root`; stdout and stderr interleaved, bounded in memory."""
    line, home = command_line(argv, root, confinement)
    process = await asyncio.create_subprocess_exec(
        *line,
        cwd=root,
        env=environment(home),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group (pgid == pid), killed as a whole
    )
    assert process.stdout is not None
    capture = _Capture()

    async def drain(stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65_536):
            capture.add(chunk)

    reader = asyncio.create_task(drain(process.stdout))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_seconds
    timed_out = False
    try:
        # `process.wait()` only returns once the pipe is closed too, which a background
        # process holding it would delay until the timeout; so watch the launcher's exit
        # (`returncode`) while reading, and fall back to `wait()` once output has ended.
        while process.returncode is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                timed_out = True
            elif reader.done():
                try:
                    await asyncio.wait_for(process.wait(), remaining)
                except TimeoutError:
                    timed_out = True
            else:
                await asyncio.wait({reader}, timeout=min(_POLL_SECONDS, remaining))
                continue
            break
    except BaseException:
        reader.cancel()
        raise
    finally:
        # Whatever happened, nothing the command started may outlive the call.
        kill_group(process.pid)
        if process.returncode is None:
            await process.wait()
    try:
        await asyncio.wait_for(reader, _DRAIN_AFTER_KILL_SECONDS)
    except TimeoutError:
        pass
    code = None if timed_out else process.returncode
    return CommandResult(capture.text(), code, timed_out, home == SANDBOX_ROOT)
