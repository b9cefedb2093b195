"""The workspace tools a piece's movement may allow: Read, Write, Edit, Glob, Grep, Bash.

They work on the job's workspace, found in the tool context: `ctx.workspace` (an
`app.engine.workspace.Workspace`); without one they answer "workspace tools need a job
workspace". Each result is kept within `ctx.result_tokens`, its share of the response's
budget (see `app.engine.truncation`). None of them is offered to chat sessions
(`in_chat=False`); Bash exists only when enabled by a setting.

The file tools live in `workspace_files`, Bash in `workspace_shell`.
"""

from __future__ import annotations

from typing import Any

from app.engine.tools import Tool
from app.engine.workspace import Workspace
from app.tools.sandbox import Confinement
from app.tools.workspace_files import ResultBudget, file_tools
from app.tools.workspace_shell import bash_tool

__all__ = ["WORKSPACE_TOOL_NAMES", "Confinement", "ResultBudget", "Workspace", "workspace_tools"]

WORKSPACE_TOOL_NAMES = ("Read", "Write", "Edit", "Glob", "Grep", "Bash")


def workspace_tools(
    *,
    bash_enabled: bool,
    bash_timeout_seconds: float,
    budget: ResultBudget | None = None,
    confinement: Confinement | None = None,
) -> list[Tool[Any]]:
    """Read, Write, Edit, Glob, Grep, and Bash when `bash_enabled`.

    `budget` carries the truncation settings (ratio, max and min tokens per result);
    the defaults are 50% of what is available, at most 60,000, at least 1,000.
    """
    budget = budget or ResultBudget()
    tools = file_tools(budget)
    if bash_enabled:
        tools.append(
            bash_tool(timeout_seconds=bash_timeout_seconds, budget=budget, confinement=confinement)
        )
    return tools
