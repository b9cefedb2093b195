"""The committed OpenAPI document is the app's, and it is clean enough for SDK generators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings

COMMITTED = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return create_app(Settings(_env_file=None)).openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if method in HTTP_METHODS
    ]


def test_committed_document_matches_the_app(document: dict[str, Any]) -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))

    assert committed == document, "openapi/openapi.json is stale: run `make openapi`"


def test_every_operation_has_tagged_operation_id_and_summary(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        tags = operation.get("tags")
        assert tags, f"{method} {path} has no tag"
        assert operation["operationId"].startswith(f"{tags[0]}-"), (method, path)
        assert operation.get("summary"), f"{method} {path} has no summary"


def test_operation_ids_are_unique(document: dict[str, Any]) -> None:
    ids = [operation["operationId"] for _, _, operation in _operations(document)]

    assert len(ids) == len(set(ids))


def test_error_responses_are_declared_as_problem_json(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")):
                assert list(response["content"]) == ["application/problem+json"], (
                    method,
                    path,
                    status,
                )


def test_authenticated_operations_declare_401_and_not_found_ones_404(
    document: dict[str, Any],
) -> None:
    # the bearer key is declared once for the document, optional: a keyless server needs none
    assert document["security"] == [{"HTTPBearer": []}, {}]
    for method, path, operation in _operations(document):
        if operation["tags"][0] == "health":
            continue
        assert "401" in operation["responses"], (method, path)
        if "{" in path:
            assert "404" in operation["responses"], (method, path)
