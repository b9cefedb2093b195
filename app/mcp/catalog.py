"""What a server's tools become for the model: filtered, named, described (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.mcp.client import ToolInfo
from app.mcp.names import ToolFilter, matches_any, model_names


@dataclass(frozen=True)
class OfferedTool:
    """One MCP tool as the model sees it: `name` is the model's, `tool` the server's."""

    name: str
    server: str
    tool: ToolInfo


def offered(
    server: str,
    tools: Iterable[ToolInfo],
    tool_filter: ToolFilter,
    globs: Sequence[str] | None = None,
) -> list[OfferedTool]:
    """The server's tools its filter and the attachment's `globs` (over the server's own
    names; None: all) let through, in the server's order; NameClash when two map to one
    model name."""
    kept = [t for t in tools if tool_filter.admits(t.name) and matches_any(t.name, globs)]
    names = model_names(server, [t.name for t in kept])
    by_tool = {tool: name for name, tool in names.items()}
    return [OfferedTool(by_tool[t.name], server, t) for t in kept]
