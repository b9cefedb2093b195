"""The application factory. Nothing is built at import: settings come in, an app goes out."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute

import app as app_package
from app.api.body_limit import BodyLimitMiddleware
from app.api.errors import install_error_handlers
from app.api.router import api_router
from app.db.engine import Database
from app.services.auth import Authenticator
from app.settings import Settings, get_settings

logger = logging.getLogger("strata")


def operation_id(route: APIRoute) -> str:
    """`{tag}-{name}`, so generated SDKs get `sessions.create`, `items.list`, …"""
    return f"{route.tags[0]}-{route.name}"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    database = Database(settings)
    app.state.database = database
    try:
        async with database.session(write=False) as db:
            if not await app.state.authenticator.keys_exist(db):
                logger.warning(
                    "no API key is configured: every request is the local tenant; "
                    "serve on loopback only, or create a key with `strata keys create`"
                )
        yield
    finally:
        await database.dispose()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="Strata",
        version=app_package.__version__,
        summary="Hosts long-running LLM agent work and keeps it on track.",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.authenticator = Authenticator(settings.configured_keys)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, default_limit=settings.max_body_bytes)
    app.include_router(api_router)
    return app
