"""The operator's stdio MCP servers (`STRATA_MCP_SERVERS_FILE`), and how one is started.

The file is a JSON object: server name → `{"command", "args", "env", "cwd", "paths",
"trusted"}`. `command` and `args` are the command line; `env` is added to the scrubbed
environment every Bash command gets; `cwd` is a folder relative to the job's folder (its
root by default); `paths` are folders the server may read besides the system's (its
installation: under bubblewrap nothing else of the file system is visible); `trusted`
(default true) says whether its tools' annotations are taken at their word (a trusted
server's read-only tool runs without a person's approval). A tenant names these servers
and never supplies a command.

Each runs under the Bash tool's confinement (`app.tools.sandbox`): the job's folder as
working directory and HOME, a scrubbed environment, resource limits, its own process group,
bubblewrap where it works; one process per job, started on first use and killed with its
group when the job ends (`McpConnection.close`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.mcp.client import StdioServer
from app.mcp.names import SERVER_NAME_PATTERN
from app.tools.sandbox import Confinement, command_line, environment

PIDFILE_VARIABLE = "STRATA_LAUNCHER_PIDFILE"
"""Where the launcher writes its pid, its process group's id (it leads the group)."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str = "."
    paths: list[str] = Field(default_factory=list)
    trusted: bool = True


@dataclass(frozen=True)
class OperatorServer:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "."
    paths: tuple[str, ...] = ()
    trusted: bool = True

    def launch(self, root: Path, confinement: Confinement) -> StdioServer:
        """How to start it for the job whose folder is `root`."""
        work = (root / self.cwd).resolve()
        if not work.is_relative_to(root.resolve()):
            work = root
        work.mkdir(parents=True, exist_ok=True)
        argv, home = command_line(
            [self.command, *self.args],
            root,
            confinement,
            read_only=[Path(p) for p in self.paths],
        )
        logs = root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        group = logs / f"mcp-{self.name}.pgid"
        return StdioServer(
            name=self.name,
            argv=tuple(argv),
            env=environment(home) | self.env | {PIDFILE_VARIABLE: str(group)},
            cwd=work,
            errlog=logs / f"mcp-{self.name}.log",
            group_file=group,
        )


class ServersFileError(ValueError):
    """STRATA_MCP_SERVERS_FILE cannot be read, or names a server wrongly."""


def load_operator_servers(path: Path | None) -> dict[str, OperatorServer]:
    """The file's servers by name; none without a file."""
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServersFileError(f"STRATA_MCP_SERVERS_FILE {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ServersFileError(f"STRATA_MCP_SERVERS_FILE {path}: not a JSON object")
    servers: dict[str, OperatorServer] = {}
    for name, value in raw.items():
        if not re.match(SERVER_NAME_PATTERN, name):
            raise ServersFileError(f"STRATA_MCP_SERVERS_FILE: {name!r} is no server name")
        try:
            entry = _Entry.model_validate(value)
        except ValidationError as exc:
            raise ServersFileError(f"STRATA_MCP_SERVERS_FILE: server {name!r}: {exc}") from exc
        servers[name] = OperatorServer(
            name=name,
            command=entry.command,
            args=tuple(entry.args),
            env=dict(entry.env),
            cwd=entry.cwd,
            paths=tuple(entry.paths),
            trusted=entry.trusted,
        )
    return servers
