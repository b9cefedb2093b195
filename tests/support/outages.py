"""A database outage under a running test, and a server that logs what escapes the app."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import make_url
from starlette.types import ASGIApp, Receive, Scope, Send

from app.settings import Settings


@contextlib.contextmanager
def database_outage(database_factory: Any, settings: Settings) -> Iterator[None]:
    """The test's database is unavailable while inside. On SQLite another process holds
    the write lock (writes fail once `sqlite_busy_timeout_ms` passed; reads go on, WAL);
    on PostgreSQL the server is stopped (everything fails)."""
    if database_factory.backend == "postgresql":
        with database_factory.server_stopped():
            yield
        return
    path = make_url(settings.database_url).database
    script = textwrap.dedent(
        f"""
        import sqlite3, sys
        db = sqlite3.connect({path!r}, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        print("locked", flush=True)
        sys.stdin.readline()
        db.execute("COMMIT")
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        try:
            yield
        finally:
            holder.stdin.write("done\n")
            holder.stdin.flush()
            holder.wait(10)


class ServedLikeUvicorn:
    """`app` as uvicorn serves it: an exception that leaves the app is logged at ERROR
    with its traceback (uvicorn's "Exception in ASGI application")."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            logging.getLogger("uvicorn.error").error(
                "Exception in ASGI application\n", exc_info=exc
            )
            raise
