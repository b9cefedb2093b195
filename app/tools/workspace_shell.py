"""Bash: a shell command in the job's workspace (off unless a setting enables it).

The command runs as `/bin/sh -c <command>` with the workspace root as its working
directory, stdin closed and a minimal environment: PATH=/usr/bin:/bin, HOME=<workspace>,
LANG=C.UTF-8 and nothing else from the server's environment (no API keys, no STRATA_*
settings). It runs in its own process group; when it times out, or the call is
cancelled, or the shell exits leaving background processes behind, the whole group is
killed, so nothing it started outlives the call.

This is not a sandbox: the command runs as the server's user and can read what that
user can. Path confinement applies to the file tools; enable Bash only where the
server's user may safely be lent to the agent (a container, a dedicated account).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from app.engine.truncation import estimate_tokens, truncate_command_output
from app.tools.registry import Tool, ToolContext, ToolOutput
from app.tools.workspace_files import ResultBudget, context_workspace

SHELL = "/bin/sh"
MINIMAL_PATH = "/usr/bin:/bin"
# Bytes of output kept from the start and from the end; the middle of a runaway output
# is dropped while reading, so memory stays bounded whatever the command prints.
_CAPTURE_BYTES = 2 * 1024 * 1024
_DRAIN_AFTER_KILL_SECONDS = 2.0
_POLL_SECONDS = 0.05


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="Shell command, run by /bin/sh -c.")
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Time limit in seconds (at most the server's limit)."
    )


@dataclass(frozen=True)
class CommandResult:
    output: str
    exit_code: int | None  # None when it timed out
    timed_out: bool


def minimal_environment(root: Path) -> dict[str, str]:
    return {"PATH": MINIMAL_PATH, "HOME": str(root), "LANG": "C.UTF-8"}


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


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def run_command(command: str, *, cwd: Path, limit_seconds: float) -> CommandResult:
    """Run `command` in `cwd` with the minimal environment; stdout and stderr interleaved."""
    process = await asyncio.create_subprocess_exec(
        SHELL,
        "-c",
        command,
        cwd=cwd,
        env=minimal_environment(cwd),
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
        # process holding it would delay until the timeout; so watch the shell's exit
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
        _kill_group(process.pid)
        if process.returncode is None:
            await process.wait()
    try:
        await asyncio.wait_for(reader, _DRAIN_AFTER_KILL_SECONDS)
    except TimeoutError:
        pass
    return CommandResult(capture.text(), None if timed_out else process.returncode, timed_out)


def _status_line(result: CommandResult, timeout: float) -> str:
    if result.timed_out:
        return f"[Timed out after {timeout:g} seconds; the command and its processes were killed.]"
    code = result.exit_code
    if code is not None and code < 0:
        return f"[Killed by signal {-code}.]"
    return f"[Exit code: {code}]"


def bash_tool(*, timeout_seconds: float, budget: ResultBudget | None = None) -> Tool[BashInput]:
    """`timeout_seconds` is the default and the most a call may ask for."""
    budget = budget or ResultBudget()

    async def invoke(ctx: ToolContext, args: BashInput) -> ToolOutput:
        workspace = context_workspace(ctx)
        tokens = budget.tokens(ctx)
        timeout = min(args.timeout_seconds or timeout_seconds, timeout_seconds)
        result = await run_command(args.command, cwd=workspace.root, limit_seconds=timeout)
        status = _status_line(result, timeout)
        output = result.output or "(no output)"
        output = output if output.endswith("\n") else output + "\n"
        cut = truncate_command_output(
            output, tokens - estimate_tokens("\n" + status), command=args.command
        )
        text = cut.text if cut.text.endswith("\n") else cut.text + "\n"
        return ToolOutput(text + status, is_error=result.timed_out)

    return Tool(
        name="Bash",
        description=(
            "Run a shell command (/bin/sh -c) in the job's workspace folder, with a minimal "
            f"environment (PATH={MINIMAL_PATH}), no stdin and a time limit of "
            f"{timeout_seconds:g} seconds by default. Answers stdout and stderr interleaved, "
            "then the exit code; long output is cut, so narrow it with head, tail or grep. "
            "Background processes are killed when the command ends."
        ),
        input_model=BashInput,
        invoke=invoke,
        in_chat=False,
    )
