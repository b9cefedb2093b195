"""Mounting the console on the application: its routes, static files and error pages."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from app.console.render import Renderer
from app.console.routes import (
    account,
    actions,
    jobs,
    keys,
    mcp_servers,
    memory,
    pieces,
    sessions,
    webhooks,
)
from app.console.web import install_error_pages
from app.settings import Settings

STATIC = Path(__file__).resolve().parent / "static"
UPLOAD_PATH = r"/console/jobs/[^/]+/files$"
"""The upload form's path: its body is a file for a job's `input/` (a multipart form)."""
FORM_OVERHEAD_BYTES = 64 * 1024
"""What a multipart form adds to the file it carries (boundaries, headers, other fields)."""


def console_router() -> APIRouter:
    # out of the OpenAPI document (it is no API); the tag names its routes' operation ids
    router = APIRouter(include_in_schema=False, tags=["console"])
    for module in (account, sessions, jobs, actions, pieces, webhooks, keys, mcp_servers, memory):
        router.include_router(module.router)
    return router


def install_console(app: FastAPI, settings: Settings) -> None:
    """Mount the console (unless STRATA_CONSOLE_ENABLED is off)."""
    if not settings.console_enabled:
        return
    app.state.console_renderer = Renderer(settings.zone)
    app.include_router(console_router())
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    install_error_pages(app)
