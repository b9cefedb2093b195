"""The application factory. Nothing is built at import: settings come in, an app goes out."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import APIRoute
from sqlalchemy.exc import SQLAlchemyError

import app as app_package
from app.api.body_limit import BodyLimitMiddleware
from app.api.docs import install_docs
from app.api.errors import install_error_handlers
from app.api.mcp import PATH as MCP_PATH
from app.api.mcp import McpEndpoint
from app.api.openapi import install_openapi
from app.api.request_context import REQUEST_ID_HEADER, RequestContextMiddleware
from app.api.router import api_router
from app.api.routes.files import UPLOAD_PATH as FILES_UPLOAD_PATH
from app.api.site_guard import SiteGuardMiddleware, SitePolicy
from app.api.strict_json import StrictJSONMiddleware
from app.console.api import HOST as CONSOLE_HOST
from app.console.install import FORM_OVERHEAD_BYTES, UPLOAD_PATH, install_console
from app.db.engine import Database
from app.engine.llm import LLM
from app.engine.tools import ToolRegistry
from app.observability.tracing import configure_tracing
from app.services.auth import Authenticator
from app.services.limits import Admission, ByteBudget
from app.settings import Settings, get_settings
from app.wiring import runtime

logger = logging.getLogger("strata")


API_DESCRIPTION = """\
Sessions keep an agent conversation as an append-only event log.

* Authenticate with `Authorization: Bearer <key>` (a server started without keys
  serves one local tenant on loopback only).
* Errors are `application/problem+json` (RFC 9457) with a stable `type`.
* Lists are cursor-paginated: pass a page's `next_cursor` as `after`.
"""


def operation_id(route: APIRoute) -> str:
    """`{tag}-{name}`, so generated SDKs get `sessions.create`, `items.list`, …"""
    return f"{route.tags[0]}-{route.name}"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    async with runtime(
        settings,
        with_runner=settings.run_worker_in_server,
        llm=app.state.llm_override,
        tools=app.state.tools_override,
    ) as parts:
        app.state.runtime = parts
        app.state.database = parts.database
        await _warn_without_keys(app, parts.database)
        async with app.state.mcp.running():
            yield


async def _warn_without_keys(app: FastAPI, database: Database) -> None:
    try:
        keys_exist = await app.state.authenticator.keys_exist(database)
    except SQLAlchemyError as exc:  # unreachable or not migrated: /readyz says which
        logger.warning("could not look for API keys at start-up: %s", type(exc).__name__)
        return
    if not keys_exist:
        logger.warning(
            "no API key is configured: every request is the local tenant; "
            "serve on loopback only, or create a key with `strata keys create`"
        )


# what a browser may send and read (CORS): the headers the API defines
CORS_REQUEST_HEADERS = [
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "Last-Event-ID",
    REQUEST_ID_HEADER,
]
CORS_EXPOSED_HEADERS = [
    "Location",
    "Retry-After",
    "Idempotent-Replayed",
    "Allow",
    REQUEST_ID_HEADER,
]


def create_app(
    settings: Settings | None = None,
    *,
    llm: LLM | None = None,
    tools: ToolRegistry | None = None,
) -> FastAPI:
    """`llm` and `tools` replace the defaults (the Anthropic SDK, the builtin tools)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="Strata",
        version=app_package.__version__,
        summary="Hosts long-running LLM agent work and keeps it on track.",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.authenticator = Authenticator(settings.configured_keys)
    app.state.admission = Admission(
        settings.tenant_max_active_jobs,
        retry_after_seconds=settings.admission_retry_after_seconds,
    )
    app.state.hook_body_budget = ByteBudget(
        settings.hook_body_budget_bytes,
        retry_after_seconds=settings.admission_retry_after_seconds,
    )
    app.state.llm_override = llm
    app.state.tools_override = tools
    install_error_handlers(app)
    app.add_middleware(StrictJSONMiddleware, own_checks=r"/hooks/claude-code$")
    app.add_middleware(
        BodyLimitMiddleware,
        default_limit=settings.max_body_bytes,
        path_limits={
            r"/hooks/": settings.hook_max_body_bytes,
            r"/jobs/[^/]+/files/input/": settings.max_workspace_file_bytes,
            UPLOAD_PATH: settings.max_workspace_file_bytes + FORM_OVERHEAD_BYTES,
            FILES_UPLOAD_PATH: settings.file_max_bytes + FORM_OVERHEAD_BYTES,
        },
    )
    app.add_middleware(
        SiteGuardMiddleware,
        policy=SitePolicy.of(
            bind_host=settings.host,
            # the console's requests into this app name it so (they come from no socket)
            allowed_hosts=[*settings.allowed_host_list, CONSOLE_HOST],
            cors_origins=settings.cors_origin_list,
        ),
    )
    app.add_middleware(RequestContextMiddleware)
    if settings.cors_origin_list:
        # outermost, so that every answer, errors included, carries the CORS headers
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=CORS_REQUEST_HEADERS,
            expose_headers=CORS_EXPOSED_HEADERS,
            allow_credentials=False,  # keys travel as bearer tokens, never as cookies
            max_age=settings.cors_max_age_seconds,
        )
    app.include_router(api_router)
    # MCP's JSON-RPC endpoint: a plain ASGI route, so out of the OpenAPI document
    app.state.mcp = McpEndpoint(settings)
    app.add_route(MCP_PATH, app.state.mcp, methods=["GET", "POST", "DELETE"])
    install_console(app, settings)
    install_docs(app)
    install_openapi(app)
    configure_tracing(settings, app)
    return app
