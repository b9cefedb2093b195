"""The OpenAPI document as SDK generators should see it.

Problem responses are served as `application/problem+json` only; FastAPI also
lists them under the route's own media type (JSON, or SSE for streams), which
would make generated clients expect a content type the server never sends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter

from app.api.errors import PROBLEM_MEDIA_TYPE
from app.api.schemas.events import STREAM_SCHEMAS

REF_TEMPLATE = "#/components/schemas/{model}"


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
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
