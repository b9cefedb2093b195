"""An app served by a real uvicorn on a loopback port, in the test's own event loop: for
clients that speak HTTP over a socket (the MCP SDK's)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI


class _Server(uvicorn.Server):
    """A uvicorn server that says when it has started (its lifespan ran, it listens)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 (a port the system chose); yields its base URL once it
    is ready, and stops it (lifespan and all) after."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    ready = asyncio.create_task(server.ready.wait())
    try:
        await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            serving.result()  # it failed to start: raise why
            raise RuntimeError("uvicorn stopped before it was ready")
        yield f"http://127.0.0.1:{port}"
    finally:
        ready.cancel()
        server.should_exit = True
        await serving
        sock.close()
