"""The committed OpenAPI document is the app's, and it is clean enough for SDK generators."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings

COMMITTED = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"
LINT_DIR = COMMITTED.parent / "lint"
LINT_WITHIN = 300.0  # seconds; each linter takes a few seconds on an idle machine
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


def test_every_json_success_response_declares_its_schema(document: dict[str, Any]) -> None:
    """A generated client parses a success body into its model only when the document
    says which: an untitled `{}` schema leaves it a bare dict (`Any`)."""
    typed = {"$ref", "type", "anyOf", "oneOf", "allOf"}
    for method, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            if status.startswith("2") and schema is not None:
                assert typed & set(schema), (method, path, status, schema)


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


def test_every_tag_is_described(document: dict[str, Any]) -> None:
    described = {tag["name"] for tag in document["tags"] if tag.get("description")}
    used = {operation["tags"][0] for _, _, operation in _operations(document)}

    assert used - described == set()


def test_event_streams_are_typed_as_the_union_of_their_events(document: dict[str, Any]) -> None:
    """A 3.1 `schema` (not 3.2's `itemSchema`), so generators type each event."""
    for path in ("/sessions/{session_id}/events", "/jobs/{job_id}/events"):
        content = document["paths"][path]["get"]["responses"]["200"]["content"]

        assert content["text/event-stream"] == {
            "schema": {"$ref": "#/components/schemas/StreamEventData"}
        }
    union = document["components"]["schemas"]["StreamEventData"]
    assert len(union["oneOf"]) == len(set(union["discriminator"]["mapping"].values()))


def _lint_tool(name: str) -> Path:
    path = LINT_DIR / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(
            f"{path} is missing: install the OpenAPI linters with `make openapi-lint-tools` "
            "(`make test` does it), i.e. `npm ci` in openapi/lint",
            pytrace=False,
        )
    return path


def _run_json(*command: str | Path) -> Any:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=LINT_DIR,
        capture_output=True,
        text=True,
        timeout=LINT_WITHIN,
        check=False,
    )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"{command[0]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")


@pytest.mark.sqlite_only  # no database: the PostgreSQL run would only repeat it
def test_spectral_recommended_rules_find_no_error() -> None:
    spectral = _lint_tool("spectral")

    found = _run_json(spectral, "lint", "--ruleset", ".spectral.yaml", "-f", "json", COMMITTED)

    errors = [
        f"{p['code']} at {'.'.join(map(str, p['path']))}: {p['message']}"
        for p in found
        if p["severity"] == 0
    ]
    warnings = sum(1 for p in found if p["severity"] == 1)
    sys.stderr.write(f"spectral: {len(errors)} errors, {warnings} warnings (make openapi-lint)\n")
    assert errors == []


@pytest.mark.sqlite_only
def test_redocly_recommended_rules_find_no_error() -> None:
    redocly = _lint_tool("redocly")

    found = _run_json(redocly, "lint", "--config", "redocly.yaml", "--format", "json", COMMITTED)

    errors = [
        f"{p['ruleId']}: {p['message']}" for p in found["problems"] if p["severity"] == "error"
    ]
    totals = found["totals"]
    sys.stderr.write(f"redocly: {totals['errors']} errors, {totals['warnings']} warnings\n")
    assert errors == []
