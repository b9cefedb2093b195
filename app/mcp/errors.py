"""What can go wrong with an MCP server, typed: the API maps each to its problem, the
agent loop to an `is_error` result the model can read."""

from __future__ import annotations


class McpFailure(Exception):
    """An MCP server could not do what was asked; `kind` names why, for events and
    problems (`mcp-<kind>`)."""

    kind = "failed"

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(f"MCP server {server!r}: {detail}")
        self.server = server
        self.detail = detail


class McpUnreachable(McpFailure):
    """No connection, no handshake, or an HTTP error that is not about credentials."""

    kind = "unreachable"


class McpAuthFailed(McpFailure):
    """The server answered 401 or 403: its `headers` carry no credentials it accepts."""

    kind = "auth-failed"


class McpTimeout(McpFailure):
    """No answer within the time allowed."""

    kind = "timeout"


class McpCrashed(McpFailure):
    """The connection ended under a request (a stdio server's process died)."""

    kind = "crashed"


class McpProtocolError(McpFailure):
    """The server answered with a JSON-RPC error or something that is not MCP."""

    kind = "protocol-error"


class McpUnavailable(McpFailure):
    """This installation cannot speak MCP: the `mcp` extra is not installed."""

    kind = "unavailable"
