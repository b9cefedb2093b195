"""One connection to one MCP server, on the official SDK's `Client`, over either transport.

* **Streamable HTTP** (`RemoteServer`): the SDK probes the current stateless protocol and
  falls back to the older initialize handshake, so both kinds of server work. The tenant's
  `headers` (tokens) go on every request; a 401 or 403 is told apart from other failures.
* **stdio** (`StdioServer`): the operator's command, started as the caller built its
  command line (`app.mcp.stdio` wraps it in the Bash tool's confinement), stopped with its
  process group when the connection closes.

The SDK's context managers hold anyio task groups, which must be left by the task that
entered them; a connection is therefore one task of its own that opens the client, says
it is ready and holds it until `close`, while any task may send it requests. A request
that outlives its time, a connection that ends under it, an HTTP error or a JSON-RPC
error becomes one of the typed failures of `app.mcp.errors`, never anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.domain.errors import InvalidInput
from app.mcp.errors import (
    McpAuthFailed,
    McpCrashed,
    McpFailure,
    McpProtocolError,
    McpTimeout,
    McpUnavailable,
    McpUnreachable,
)
from app.tools.sandbox import kill_group

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

logger = logging.getLogger("strata.mcp")

CLIENT_NAME = "strata"


AddressCheck = Callable[[str], Awaitable[str | None]]
"""The address check of a URL (`app.services.webhook_targets.checked_address`): its host
resolved once and every address allowed, answering the address to connect to (None: any
address is allowed, connect by name); a refused URL raises `InvalidInput`."""


@dataclass(frozen=True)
class RemoteServer:
    """A tenant's server over Streamable HTTP. With `check`, each connection runs it first
    and connects to the address that passed, never resolving the name again (see
    `pinned_transport`)."""

    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    check: AddressCheck | None = None


@dataclass(frozen=True)
class StdioServer:
    """An operator's server over stdio: the full command line to start, as is."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    # where the server's stderr goes (a job's logs/ file); None: nowhere
    errlog: Path | None = None
    # where its launcher writes its process group's id, to kill the group at the close
    # (a server that exits when its input closes leaves what it started running)
    group_file: Path | None = None


ServerSpec = RemoteServer | StdioServer


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the server lists it (its own name, not the model's)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    idempotent: bool = False
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    call: float


class McpConnection:
    """An open client to one server: `start`, then `list_tools` / `call_tool`, `close`."""

    def __init__(self, server: ServerSpec, timeouts: Timeouts) -> None:
        self.server = server
        self.timeouts = timeouts
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        # the last HTTP status the server answered 401 or 403 with, if it did
        self._auth_status: int | None = None
        self._error: McpFailure | None = None
        # set when the connection ended under a request: it is no use any more
        self._broken = False

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def alive(self) -> bool:
        return self._client is not None and not self._ended.is_set() and not self._broken

    async def start(self) -> None:
        """Connect and finish the handshake within the connect timeout, or raise."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp {self.name}")
        try:
            async with asyncio.timeout(self.timeouts.connect):
                await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise McpTimeout(
                self.name, f"no handshake within {self.timeouts.connect:g} seconds"
            ) from None
        except BaseException:
            await self.close()
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._new_client(stack))
                self._client = client
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # the task's end: what went wrong is the callers'
            failure = self._failure(exc, during="connect" if not ready.done() else "close")
            if not ready.done():
                ready.set_exception(failure)
            else:
                self._error = failure
                logger.info("%s", failure)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._ended.set()

    async def _new_client(self, stack: contextlib.AsyncExitStack) -> Client:
        try:
            from mcp import Client, StdioServerParameters
            from mcp_types import Implementation
        except ImportError as exc:  # pragma: no cover - the extra is part of every install
            raise McpUnavailable(self.name, "the `mcp` extra is not installed") from exc
        info = Implementation(name=CLIENT_NAME, version="1")
        server = self.server
        if isinstance(server, StdioServer):
            where = server.errlog if server.errlog is not None else Path(os.devnull)
            errlog = stack.enter_context(await asyncio.to_thread(where.open, "a", encoding="utf-8"))
            params = StdioServerParameters(
                command=server.argv[0],
                args=list(server.argv[1:]),
                env=server.env,
                cwd=server.cwd,
                encoding_error_handler="replace",
            )
            from mcp.client.stdio import stdio_client

            return Client(stdio_client(params, errlog=errlog), client_info=info, cache=None)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def seen(response: httpx2.Response) -> None:
            if response.status_code in (401, 403):
                self._auth_status = response.status_code

        transport = await self._transport(server)
        http = httpx2.AsyncClient(
            transport=transport,
            headers=server.headers,
            timeout=httpx2.Timeout(self.timeouts.connect, read=self.timeouts.call),
            event_hooks={"response": [seen]},
        )
        await stack.enter_async_context(http)
        streams = streamable_http_client(server.url, http_client=http)
        return Client(streams, client_info=info, cache=None)

    async def _transport(self, server: RemoteServer) -> Any:
        """The HTTP transport to `server`: pinned to the address its check passed."""
        if server.check is None:
            return None
        try:
            address = await server.check(server.url)
        except InvalidInput as exc:
            raise McpUnreachable(self.name, f"connect: refused: {exc.detail}") from exc
        if address is None:
            return None
        return pinned_transport(server.url, address)

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool the server lists, page after page."""
        client = self._open()
        tools: list[ToolInfo] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.timeouts.connect):
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(_tool_info(tool) for tool in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        except Exception as exc:
            raise self._failure(exc, during="tools/list") from exc

    async def call_tool(
        self, name: str, arguments: dict[str, Any], limit_seconds: float | None = None
    ) -> CallToolResult:
        """The server's answer to one call, within `limit_seconds` (by default the
        connection's call timeout)."""
        client = self._open()
        limit = limit_seconds or self.timeouts.call
        try:
            async with asyncio.timeout(limit):
                return await client.call_tool(name, arguments, read_timeout_seconds=limit)
        except TimeoutError as exc:
            raise McpTimeout(self.name, f"{name}: no answer within {limit:g} seconds") from exc
        except Exception as exc:
            failure = self._failure(exc, during=name)
            self._broken = isinstance(failure, McpCrashed)
            raise failure from exc

    def _open(self) -> Client:
        if self._client is None or self._ended.is_set():
            raise self._error or McpCrashed(self.name, "the connection has ended")
        return self._client

    async def close(self) -> None:
        """End the connection (a stdio server's process group with it); idempotent."""
        self._stop.set()
        task = self._task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), self.timeouts.connect)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:  # its failure was recorded by `_hold`
            pass
        finally:
            await self._kill_group()

    async def _kill_group(self) -> None:
        """A stdio server's whole process group, killed once its connection ended."""
        server = self.server
        if not isinstance(server, StdioServer) or server.group_file is None:
            return
        try:
            text = await asyncio.to_thread(server.group_file.read_text, encoding="ascii")
            await asyncio.to_thread(server.group_file.unlink)
        except OSError:
            return
        if text.strip().isdigit():
            kill_group(int(text))

    def _failure(self, exc: BaseException, *, during: str) -> McpFailure:
        """The typed failure `exc` means."""
        leaf = _leaf(exc)
        if isinstance(leaf, McpFailure):
            return leaf
        if self._auth_status is not None:
            return McpAuthFailed(
                self.name, f"{during}: the server answered HTTP {self._auth_status}"
            )
        if isinstance(leaf, TimeoutError):
            return McpTimeout(self.name, f"{during}: no answer in time")
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(leaf, MCPError):
            if leaf.code == REQUEST_TIMEOUT:
                return McpTimeout(self.name, f"{during}: {leaf.message}")
            if leaf.code == CONNECTION_CLOSED:
                kind = McpUnreachable if during == "connect" else McpCrashed
                return kind(self.name, f"{during}: the connection closed ({leaf.message})")
            if during == "connect":
                return McpUnreachable(self.name, f"{during}: {leaf.message}")
            return McpProtocolError(self.name, f"{during}: {leaf.message} (code {leaf.code})")
        if isinstance(leaf, OSError) or type(leaf).__module__.startswith("httpx"):
            return McpUnreachable(self.name, f"{during}: {type(leaf).__name__}: {leaf}")
        if isinstance(leaf, asyncio.CancelledError):
            return McpCrashed(self.name, f"{during}: the connection was stopped")
        return McpProtocolError(self.name, f"{during}: {type(leaf).__name__}: {leaf}")


def pinned_transport(url: str, address: str) -> Any:
    """An HTTP transport that connects every request for `url`'s host and port to
    `address`, keeping the name in `Host` and in TLS (SNI and the certificate check), so
    that a name answering another address a moment after its check (DNS rebinding) cannot
    redirect the connection; a request for any other origin is refused."""
    import httpx2

    origin = httpx2.URL(url)

    class Pinned(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            asked = request.url
            if (asked.scheme, asked.host, asked.port) != (origin.scheme, origin.host, origin.port):
                raise httpx2.ConnectError(f"{asked.host}: not the checked host", request=request)
            request.url = asked.copy_with(host=address)
            request.extensions = {**request.extensions, "sni_hostname": origin.host}
            return await super().handle_async_request(request)

    return Pinned()


def _leaf(exc: BaseException) -> BaseException:
    """The first exception an exception group (anyio's task groups) holds."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tool_info(tool: Any) -> ToolInfo:
    annotations = tool.annotations
    hints = annotations.model_dump(exclude_none=True) if annotations is not None else {}
    return ToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        read_only=bool(annotations is not None and annotations.read_only_hint),
        idempotent=bool(annotations is not None and annotations.idempotent_hint),
        annotations=hints,
    )


@contextlib.asynccontextmanager
async def connected(server: ServerSpec, timeouts: Timeouts) -> Any:
    """A started connection, closed on the way out."""
    connection = McpConnection(server, timeouts)
    await connection.start()
    try:
        yield connection
    finally:
        await connection.close()
