"""The MCP connections of one job: each server connected on first use, all closed (a
stdio server's process group killed) when the job ends."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.mcp.client import McpConnection, RemoteServer, Timeouts
from app.mcp.stdio import OperatorServer
from app.tools.sandbox import Confinement


@dataclass(frozen=True)
class ServerSource:
    """How to reach one attached server: a tenant's over HTTP, or the operator's stdio one;
    `trusted`: whether its tools' annotations are taken at their word (see `mcp_default`)."""

    name: str
    timeouts: Timeouts
    remote: RemoteServer | None = None
    operator: OperatorServer | None = None
    trusted: bool = False


class McpPool:
    """Connections by server name. `root` is the job's folder, for stdio servers (a
    temporary one, removed at `close`, when the job has none)."""

    def __init__(self, confinement: Confinement, root: Path | None = None) -> None:
        self.confinement = confinement
        self._root = root
        self._own_root: Path | None = None
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # told of each server's state: (server, "ok" | failure kind, detail)
        self.on_status: Callable[[str, str, str], None] | None = None
        self._states: dict[str, str] = {}

    def _folder(self) -> Path:
        if self._root is not None:
            return self._root
        if self._own_root is None:
            self._own_root = Path(tempfile.mkdtemp(prefix="strata-mcp-"))
        return self._own_root

    async def connection(self, source: ServerSource) -> McpConnection:
        """The server's open connection, started now if it has none (or its last ended)."""
        lock = self._locks.setdefault(source.name, asyncio.Lock())
        async with lock:
            current = self._connections.get(source.name)
            if current is not None and current.alive:
                return current
            if current is not None:
                await current.close()
            if source.operator is not None:
                spec = source.operator.launch(self._folder(), self.confinement)
                connection = McpConnection(spec, source.timeouts)
            else:
                assert source.remote is not None
                connection = McpConnection(source.remote, source.timeouts)
            await connection.start()
            self._connections[source.name] = connection
            return connection

    def status(self, server: str, state: str, detail: str = "") -> None:
        """Tell `on_status` of a server's state when it changed (or first seen failing)."""
        before = self._states.get(server)
        self._states[server] = state
        if self.on_status is not None and before != state and (before or state != "ok"):
            self.on_status(server, state, detail)

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()
        if self._own_root is not None:
            await asyncio.to_thread(shutil.rmtree, self._own_root, True)
            self._own_root = None
