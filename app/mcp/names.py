"""The names the model sees for MCP tools, and which tools a filter lets through.

Pure: no I/O. A tool `t` of server `s` is offered as `mcp__s__t`, every character
outside `[A-Za-z0-9_-]` mapped to `_` (what the Messages API accepts in a tool name);
two tools of one server that map to one name, or a name longer than the API takes,
cannot be offered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Final

PREFIX: Final = "mcp__"
SEPARATOR: Final = "__"
MAX_NAME_CHARS: Final = 64
"""The longest tool name the Messages API accepts."""

SERVER_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,31}$"
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")


def model_name(server: str, tool: str) -> str:
    """What the model calls the server's tool."""
    return f"{PREFIX}{server}{SEPARATOR}{_OUTSIDE.sub('_', tool)}"


def is_mcp_name(name: str) -> bool:
    return name.startswith(PREFIX)


@dataclass(frozen=True)
class ToolFilter:
    """Shell globs over a server's own tool names: `allow` (empty: every tool), then
    `deny`, which wins."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = field(default=())

    def admits(self, tool: str) -> bool:
        if self.allow and not any(fnmatchcase(tool, glob) for glob in self.allow):
            return False
        return not any(fnmatchcase(tool, glob) for glob in self.deny)


def matches_any(name: str, globs: Sequence[str] | None) -> bool:
    """Whether `name` matches one of `globs`; None matches everything."""
    return globs is None or any(fnmatchcase(name, glob) for glob in globs)


class NameClash(ValueError):
    """Two tools map to one model name, or a name is too long for the API."""


def model_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """The model's name of each tool (model name → the server's name); NameClash names
    the first two tools that map to one name, or a name too long."""
    names: dict[str, str] = {}
    for tool in tools:
        name = model_name(server, tool)
        if len(name) > MAX_NAME_CHARS:
            raise NameClash(
                f"tool {tool!r} of MCP server {server!r} would be named {name!r}, longer "
                f"than the {MAX_NAME_CHARS} characters a tool name may have"
            )
        if name in names:
            raise NameClash(
                f"tools {names[name]!r} and {tool!r} of MCP server {server!r} are both "
                f"named {name!r} once mapped to the characters a tool name may hold"
            )
        names[name] = tool
    return names
