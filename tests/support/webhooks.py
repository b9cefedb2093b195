"""A webhook receiver on loopback for tests: records every request, answers as scripted."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from app.domain.webhook_signing import verify


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    status: int  # what the receiver answered

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def json(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    def verify(self, secret: str) -> None:
        verify(secret, self.headers, self.body)


def closed_url() -> str:
    """A loopback URL on a port nothing listens on (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/strata"


class Receiver:
    """`http.server` in a thread. `statuses` are answered in order, then `default`."""

    def __init__(self, statuses: Iterable[int] = (), *, default: int = 200, port: int = 0):
        self._statuses = list(statuses)
        self._default = default
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks/strata"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                status = receiver._record(self.path, headers, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            status = self._statuses.pop(0) if self._statuses else self._default
            self._received.append(Received(path, headers, body, status))
            return status

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    async def wait_for(self, count: int, *, seconds: float = 15.0) -> list[Received]:
        """Poll until `count` requests arrived (observable state, not a fixed sleep)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while len(self.received) < count:
            assert loop.time() < deadline, f"{len(self.received)} of {count} requests arrived"
            await asyncio.sleep(0.02)
        return self.received

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
