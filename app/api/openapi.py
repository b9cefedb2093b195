"""The OpenAPI document as SDK generators should see it.

Problem responses are served as `application/problem+json` only; FastAPI also
lists them under the route's own media type (JSON, or SSE for streams), which
would make generated clients expect a content type the server never sends.
"""

from __future__ import annotations

from typing import Any, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, TypeAdapter

from app.api import openapi_contract as contract
from app.api.errors import PROBLEM_MEDIA_TYPE
from app.api.schemas.events import STREAM_SCHEMAS
from app.api.schemas.hooks import ClaudeCodeHook
from app.api.schemas.items import ItemKind
from app.domain.jobs import JobKind, JobStatus
from app.domain.tasks import TaskOpName, TaskStatus
from app.services.webhooks import EVENT_TYPES
from app.wiring import builtin_tools

# one named schema each, wherever the same set of values appears
NAMED_ENUMS: dict[str, tuple[str, ...]] = {
    "TaskStatus": get_args(TaskStatus),
    "TaskOp": get_args(TaskOpName),
    "JobStatus": tuple(status.value for status in JobStatus),
    "JobKind": tuple(kind.value for kind in JobKind),
    "ItemKind": tuple(kind.value for kind in ItemKind),
    "WebhookEventType": EVENT_TYPES,
    "WebhookEventSelector": ("*", *EVENT_TYPES),
}
# create operations → (the path parameter their id fills, where the id is in the 201 body)
CREATORS = {
    "sessions-create": ("session_id", "/id"),
    "jobs-create": ("job_id", "/id"),
    "webhooks-create": ("webhook_id", "/id"),
}

# every tag, described, in the order the API docs list them (a test fails on a tag not here)
TAGS: list[dict[str, str]] = [
    {"name": "sessions", "description": "Agent conversations: create, list, read, rename, delete."},
    {
        "name": "chat",
        "description": "A user message starts a turn (a chat job), optionally waiting for its "
        "answer; compaction on demand.",
    },
    {
        "name": "items",
        "description": "A session's append-only log: messages, answers, tool calls and results.",
    },
    {
        "name": "events",
        "description": "Server-Sent Events of a session or a job: replayed from any position "
        "(`Last-Event-ID`), then live.",
    },
    {
        "name": "tasks",
        "description": "The agent's task list, rebuilt from the log; changes made here are "
        "notes the agent reads.",
    },
    {
        "name": "memory",
        "description": "Layered memory: the memory block, the turns timeline, a turn's "
        "detail, and merges of sessions.",
    },
    {
        "name": "jobs",
        "description": "Long work from a queue: chat turns and piece jobs, their comments "
        "and workspace files.",
    },
    {"name": "pieces", "description": "The pieces a job can run: movements and transitions."},
    {
        "name": "tools",
        "description": "The tools a session may be offered, and the tool policies that decide "
        "each call.",
    },
    {
        "name": "webhooks",
        "description": "Signed outbound webhooks: subscriptions, their deliveries, a test "
        "send, redelivery and secret rotation.",
    },
    {
        "name": "files",
        "description": "Files a tenant uploads (images, PDFs, text) to attach to messages by "
        "id: upload, list, read, download, delete.",
    },
    {
        "name": "mcp-servers",
        "description": "The tenant's MCP servers, whose tools sessions attach: register, "
        "refresh (the tools as the model sees them), change, remove.",
    },
    {
        "name": "api-keys",
        "description": "The tenant's own API keys: list, create (shown once), revoke.",
    },
    {
        "name": "hooks",
        "description": "Inbound hooks: Claude Code's hook events and transcripts.",
    },
    {"name": "health", "description": "Liveness and readiness probes."},
    {"name": "metrics", "description": "Prometheus metrics of the processes and the database."},
]
# relative: the server that serves the document (`make serve`: http://127.0.0.1:8000), so
# the served API docs call the server they came from
SERVERS = [{"url": "/", "description": "The Strata server that serves this document"}]
LICENSE = {"name": "MIT", "identifier": "MIT"}

REF_TEMPLATE = "#/components/schemas/{model}"
# request bodies a route reads itself (declared in its `openapi_extra`), as components
READ_BY_THE_ROUTE: dict[str, type[BaseModel]] = {"ClaudeCodeHook": ClaudeCodeHook}


def add_named_schemas(schemas: dict[str, Any], named: dict[str, Any]) -> None:
    """Each type (a model, an enum or an annotated union) as a component of that name,
    with the models it uses beside it."""
    for name, kind in named.items():
        schema = TypeAdapter(kind).json_schema(ref_template=REF_TEMPLATE, mode="serialization")
        for def_name, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(def_name, definition)
        schemas[name] = schema


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
                tags=TAGS,
                servers=SERVERS,
                license_info=LICENSE,
            )
            problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
            for operations in document.get("paths", {}).values():
                for operation in operations.values():
                    for status, response in operation.get("responses", {}).items():
                        content = response.get("content", {})
                        if PROBLEM_MEDIA_TYPE in content:
                            response["content"] = {PROBLEM_MEDIA_TYPE: content[PROBLEM_MEDIA_TYPE]}
                        elif status == "422":  # FastAPI's own validation answer: ours is a problem
                            response["content"] = problem
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            add_named_schemas(schemas, STREAM_SCHEMAS)
            for name, model in READ_BY_THE_ROUTE.items():
                schemas.setdefault(name, model.model_json_schema(ref_template=REF_TEMPLATE))
            contract.name_shared_enums(document, NAMED_ENUMS)
            contract.require_always_present(document)
            contract.parameters_without_null(document)
            tools = app.state.tools_override or builtin_tools(app.state.settings)
            contract.name_tool_names(document, list(tools.names))
            contract.declare_common_responses(document)
            contract.make_security_optional(document, "HTTPBearer")
            contract.add_links(document, CREATORS)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
