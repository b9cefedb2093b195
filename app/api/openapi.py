"""The OpenAPI document as SDK generators should see it.

Problem responses are served as `application/problem+json` only; FastAPI also
lists them under the route's own media type (JSON, or SSE for streams), which
would make generated clients expect a content type the server never sends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.api.errors import PROBLEM_MEDIA_TYPE


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
            schemas = document.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
