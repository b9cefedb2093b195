"""The MCP client against real servers over both transports, and its typed failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.mcp.client import McpConnection, RemoteServer, StdioServer, Timeouts, connected
from app.mcp.errors import (
    McpAuthFailed,
    McpCrashed,
    McpProtocolError,
    McpTimeout,
    McpUnreachable,
)
from tests.support.mcp import (
    REPO,
    HttpServer,
    everything_stdio,
    fault_stdio,
    time_server,
)

TIMEOUTS = Timeouts(connect=30.0, call=30.0)


def stdio(name: str, argv: list[str], tmp_path: Path) -> StdioServer:
    return StdioServer(name=name, argv=tuple(argv), env={"PATH": "/usr/bin:/bin"}, cwd=REPO)


async def test_a_stdio_server_lists_its_tools_and_answers_a_call(tmp_path: Path) -> None:
    async with connected(stdio("time", time_server(), tmp_path), TIMEOUTS) as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        result = await server.call_tool("get_current_time", {"timezone": "UTC"})
    assert "get_current_time" in tools
    assert tools["get_current_time"].input_schema["type"] == "object"
    assert not result.is_error
    assert "UTC" in result.content[0].text


async def test_the_reference_server_answers_over_stdio(tmp_path: Path) -> None:
    async with connected(stdio("every", everything_stdio(), tmp_path), TIMEOUTS) as server:
        names = [tool.name for tool in await server.list_tools()]
        result = await server.call_tool("echo", {"message": "hi"})
    assert "echo" in names
    assert "hi" in result.content[0].text


async def test_the_reference_server_answers_over_streamable_http(
    everything_http: HttpServer,
) -> None:
    async with connected(RemoteServer("every", everything_http.url()), TIMEOUTS) as server:
        result = await server.call_tool("echo", {"message": "over http"})
    assert "over http" in result.content[0].text


async def test_a_stateless_streamable_http_server_answers(fault_http: HttpServer) -> None:
    async with connected(RemoteServer("faults", fault_http.url()), TIMEOUTS) as server:
        result = await server.call_tool("echo", {"text": "x"})
    assert result.content[0].text == "echo: x"


async def test_a_call_past_its_timeout_is_a_timeout(fault_http: HttpServer) -> None:
    async with connected(RemoteServer("faults", fault_http.url()), TIMEOUTS) as server:
        with pytest.raises(McpTimeout):
            await server.call_tool("hang", {}, limit_seconds=0.5)


async def test_a_process_that_dies_under_a_call_is_a_crash(tmp_path: Path) -> None:
    async with connected(stdio("faults", fault_stdio(), tmp_path), TIMEOUTS) as server:
        with pytest.raises(McpCrashed):
            await server.call_tool("crash", {})


async def test_an_unknown_tool_is_a_protocol_error_or_an_error_result(
    fault_http: HttpServer,
) -> None:
    async with connected(RemoteServer("faults", fault_http.url()), TIMEOUTS) as server:
        try:
            result = await server.call_tool("nope", {})
        except McpProtocolError:
            return
    assert result.is_error


async def test_a_server_answering_500_is_unreachable(fault_http: HttpServer) -> None:
    with pytest.raises(McpUnreachable):
        async with connected(RemoteServer("faults", fault_http.url("/broken/mcp")), TIMEOUTS):
            pass


async def test_a_server_answering_401_is_an_auth_failure(fault_http: HttpServer) -> None:
    with pytest.raises(McpAuthFailed):
        async with connected(RemoteServer("faults", fault_http.url("/locked/mcp")), TIMEOUTS):
            pass


async def test_the_headers_carry_the_token(fault_http: HttpServer) -> None:
    server = RemoteServer(
        "faults", fault_http.url("/locked/mcp"), {"Authorization": "Bearer open-sesame"}
    )
    async with connected(server, TIMEOUTS) as connection:
        assert next(t.name for t in await connection.list_tools()) == "echo"


async def test_nothing_listening_is_unreachable() -> None:
    connection = McpConnection(RemoteServer("gone", "http://127.0.0.1:9/mcp"), TIMEOUTS)
    with pytest.raises(McpUnreachable):
        await connection.start()


async def test_a_command_that_cannot_start_is_unreachable(tmp_path: Path) -> None:
    connection = McpConnection(stdio("none", [str(tmp_path / "missing")], tmp_path), TIMEOUTS)
    with pytest.raises(McpUnreachable):
        await connection.start()
