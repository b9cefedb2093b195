"""A started app and a client talking to it in process: what most API tests need."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from app.engine.tools import ToolRegistry
from app.main import create_app
from app.settings import Settings

BASE_URL = "http://strata.test"
# the names the in-process clients send as Host: this one, the short `t` of a few tests and
# Starlette's `testserver` (Schemathesis); a deployment lists its public names the same way
IN_PROCESS_HOSTS = "strata.test,t,testserver"


def client_for(app: FastAPI) -> httpx.AsyncClient:
    """A client for `app` that sees a crash as the 500 a real client would get."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL)


@asynccontextmanager
async def serve(
    settings: Settings, *, tools: ToolRegistry | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app with these settings (and tools), its lifespan run, and a client for it."""
    application = create_app(settings, tools=tools)
    async with application.router.lifespan_context(application), client_for(application) as c:
        yield application, c
