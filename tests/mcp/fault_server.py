"""The suite's own MCP server for faults, on the SDK's `MCPServer`.

`python -m tests.mcp.fault_server stdio [--tools N]` serves over stdio;
`python -m tests.mcp.fault_server http [--tools N]` binds a loopback port, prints it on
the first line of stdout (the socket listens before the line is written, so a client
may connect at once) and serves Streamable HTTP at `/mcp`, plus two faulty paths:
`/broken/mcp` answers every request 500 and `/locked/mcp` answers 401 unless the
request carries `Authorization: Bearer open-sesame`. It answers requests whose `Host` is a
loopback name or `TEST_HOST`.

Tools: `echo`, `hang` (never answers), `crash` (the process exits), `big` (a 5 MB
answer), `structured` (structured content and no text), `fails` (an `isError` result),
`read_clock` (annotated read-only), `grow` (adds a tool `grown` to the server), `pids`
(starts a `sleep` in the server's process group and answers `<server pid> <sleep pid>`),
`picture` (a PNG of the size asked for, after a line of text), `not_picture` (image
content whose bytes are no image), and with `--tools N` N more (`t000` …).
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import subprocess
import sys
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations

from tests.fakes import media

BIG_BYTES = 5 * 1024 * 1024
SECRET = "Bearer open-sesame"
TEST_HOST = "mcp.example"
"""A name the tests make resolve to loopback (a DNS rebinding); the server answers it."""


def build(extra_tools: int) -> MCPServer:
    server = MCPServer("faults")

    @server.tool(description="Answer the text given.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Never answer.")
    async def hang() -> str:
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool(description="End the server's process.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="A 5 MB answer.")
    def big() -> str:
        return "0123456789abcdef" * (BIG_BYTES // 16)

    @server.tool(description="Structured content only.", structured_output=False)
    def structured() -> CallToolResult:
        return CallToolResult(content=[], structured_content={"temperature": 21, "unit": "C"})

    @server.tool(description="Always fails.")
    def fails() -> str:
        raise ValueError("the disk is on fire")

    @server.tool(description="Read a clock.", annotations=ToolAnnotations(read_only_hint=True))
    def read_clock() -> str:
        return "12:00"

    @server.tool(description="Add a tool `grown` to this server.")
    def grow() -> str:
        server.tool(name="grown", description="Added at run time.")(lambda: "grown")
        return "grown"

    sleepers: list[subprocess.Popen[bytes]] = []

    @server.tool(description="The server's pid and a child's in its process group.")
    def pids() -> str:
        sleepers.append(subprocess.Popen(["sleep", "3600"]))
        return f"{os.getpid()} {sleepers[-1].pid}"

    @server.tool(description="A PNG of the size asked for.", structured_output=False)
    def picture(width: int, height: int) -> CallToolResult:
        data = base64.b64encode(media.png(width, height)).decode("ascii")
        return CallToolResult(
            content=[
                TextContent(type="text", text=f"a {width} by {height} picture"),
                ImageContent(type="image", data=data, mime_type="image/png"),
            ]
        )

    @server.tool(description="Image content whose bytes are no image.", structured_output=False)
    def not_picture() -> CallToolResult:
        data = base64.b64encode(b"this is no picture").decode("ascii")
        return CallToolResult(
            content=[ImageContent(type="image", data=data, mime_type="image/png")]
        )

    for index in range(extra_tools):
        name = f"t{index:03d}"

        def filler(n: str = name) -> str:
            return n

        server.tool(name=name, description=f"filler tool {name}")(filler)
    return server


def _faulty(app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/broken/"):
            await _plain(send, 500, b"broken")
            return
        if scope["type"] == "http" and path.startswith("/locked/"):
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != SECRET:
                await _plain(send, 401, b"who are you?")
                return
            scope = {**scope, "path": path.removeprefix("/locked"), "raw_path": None}
        await app(scope, receive, send)

    return wrapped


async def _plain(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--tools", type=int, default=0)
    args = parser.parse_args()
    server = build(args.tools)
    if args.transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    sock = socket.socket()
    # answers go out at once: with Nagle on, an answer written in parts waits for the
    # client's delayed ACK, ~40 ms a call (the connections accepted inherit the option)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    # the Host names it answers: loopback's, and the name the tests resolve to loopback
    hosts = TransportSecuritySettings(
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", f"{TEST_HOST}:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    app = _faulty(server.streamable_http_app(transport_security=hosts))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
