"""Bash: a shell command in the job's workspace (off unless a setting enables it).

The command runs as `/bin/sh -c <command>` confined by `app.tools.sandbox`: the job
folder as working directory and HOME, stdin closed, a scrubbed environment, resource
limits (CPU time, memory, file size, processes), its own process group killed whole when
it ends, times out or is cancelled, and a parent-death signal for a server that dies.
Where bubblewrap works, it sees only the job folder (as `/workspace`) and the system's
programs read-only, without network; elsewhere it can read what the server's user can,
so enable Bash only where that user may safely be lent to the agent.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.engine.tools import Tool, ToolContext, ToolOutput
from app.engine.truncation import estimate_tokens, truncate_command_output
from app.tools.sandbox import MINIMAL_PATH, CommandResult, Confinement, run_confined
from app.tools.workspace_files import ResultBudget, context_workspace

SHELL = "/bin/sh"


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="Shell command, run by /bin/sh -c.")
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Time limit in seconds (at most the server's limit)."
    )


def _status_line(result: CommandResult, timeout: float) -> str:
    if result.timed_out:
        return f"[Timed out after {timeout:g} seconds; the command and its processes were killed.]"
    code = result.exit_code
    if code is not None and code < 0:
        return f"[Killed by signal {-code}.]"
    return f"[Exit code: {code}]"


def bash_tool(
    *,
    timeout_seconds: float,
    budget: ResultBudget | None = None,
    confinement: Confinement | None = None,
) -> Tool[BashInput]:
    """`timeout_seconds` is the default and the most a call may ask for."""
    budget = budget or ResultBudget()
    confinement = confinement or Confinement()

    async def invoke(ctx: ToolContext, args: BashInput) -> ToolOutput:
        workspace = context_workspace(ctx)
        tokens = budget.tokens(ctx)
        timeout = min(args.timeout_seconds or timeout_seconds, timeout_seconds)
        result = await run_confined(
            [SHELL, "-c", args.command],
            root=workspace.root,
            limit_seconds=timeout,
            confinement=confinement,
        )
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
            "Run a shell command (/bin/sh -c) in the job's workspace folder (its input/, "
            f"output/ and logs/), with a minimal environment (PATH={MINIMAL_PATH}), no stdin, "
            f"limits on CPU, memory, file size and processes, and a time limit of "
            f"{timeout_seconds:g} seconds by default. Answers stdout and stderr interleaved, "
            "then the exit code; long output is cut, so narrow it with head, tail or grep. "
            "Background processes are killed when the command ends."
        ),
        input_model=BashInput,
        invoke=invoke,
        in_chat=False,
    )
