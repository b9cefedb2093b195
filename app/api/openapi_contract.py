"""Rewrites of the generated OpenAPI document that make it as strict, and as plain, as the
server: what a generated client can build, the server accepts; what it receives, it can type.

Each function takes the document (a JSON dict) and changes it in place:
- `name_shared_enums`: a set of values used in several places (task status, job status,
  webhook event types, ...) becomes one named schema, referenced everywhere, so a generator
  makes one type of it instead of one per place;
- `require_always_present`: in schemas only responses use, every property is required (the
  server always sends every field; nullable ones as null), so clients do not type them as
  optional; schemas sent sparsely (problems, readiness, hook answers) are left alone;
- `parameters_without_null`: an optional query or header parameter is left out, never
  `null`;
- `declare_common_responses`: every operation declares 500, every 201 its `Location`;
- `make_security_optional`: a bearer key is declared once, optional, since a keyless server
  (loopback only) needs none and a client must be able to call it without one;
- `add_links`: OpenAPI links from each created resource's id to the operations on it, which
  clients and Schemathesis's stateful phase follow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

REF = "#/components/schemas/"
# answered with fields left out on purpose (absent, not null)
SPARSE_SCHEMAS = frozenset({"Problem", "FieldError", "Readiness", "HookAnswer"})
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document.get("paths", {}).items():
        for method in HTTP_METHODS:
            if method in item:
                yield path, method, item[method]


def name_shared_enums(document: dict[str, Any], named: dict[str, tuple[str, ...]]) -> None:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    by_values = {frozenset(values): name for name, values in named.items()}
    for name, values in named.items():
        schemas[name] = {"type": "string", "enum": list(values), "title": name}
    targets = [document.get("paths", {})] + [
        schema for key, schema in schemas.items() if key not in named
    ]
    for node in _walk(targets):
        found = node.get("enum")
        if not isinstance(found, list) or len(found) < 2:
            continue
        shared = by_values.get(frozenset(found))
        if shared is None or node.get("type", "string") != "string":
            continue
        description = node.get("description")
        node.clear()
        node["$ref"] = REF + shared
        if description:
            node["description"] = description


def _refs(node: Any) -> set[str]:
    return {
        str(found["$ref"]).removeprefix(REF)
        for found in _walk(node)
        if isinstance(found.get("$ref"), str) and str(found["$ref"]).startswith(REF)
    }


def _closure(names: set[str], schemas: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]) - seen)
    return seen


def require_always_present(document: dict[str, Any]) -> None:
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    inputs: set[str] = set()
    outputs: set[str] = set()
    for _path, _method, operation in _operations(document):
        inputs |= _refs(operation.get("requestBody", {})) | _refs(operation.get("parameters", []))
        outputs |= _refs(operation.get("responses", {}))
    only_out = _closure(outputs, schemas) - _closure(inputs, schemas) - SPARSE_SCHEMAS
    for name in only_out:
        properties = schemas[name].get("properties")
        if properties:
            schemas[name]["required"] = list(properties)


def parameters_without_null(document: dict[str, Any]) -> None:
    """A query or header parameter is absent or a string: `null` is not something a client
    can send (FastAPI declares `X | None` parameters as `anyOf [X, null]`)."""
    for _path, _method, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            schema = parameter.get("schema", {})
            options = schema.get("anyOf")
            if not isinstance(options, list):
                continue
            kept = [option for option in options if option.get("type") != "null"]
            if len(kept) == 1 and len(kept) < len(options):
                del schema["anyOf"]
                schema.update(kept[0])


MCP_TOOL_GLOB = r"^mcp__[A-Za-z0-9_*?\[\]!-]+$"
"""An MCP tool's name, or a glob over such names (`mcp__git__*`)."""


def name_tool_names(document: dict[str, Any], names: list[str]) -> None:
    """The tools a session may be offered are the server's (a named enum) or MCP tools,
    named by glob (`mcp__<server>__<tool>`): one schema, `ToolName`."""
    schemas = document.get("components", {}).get("schemas", {})
    schemas["ToolName"] = {
        "title": "ToolName",
        "anyOf": [
            {"type": "string", "enum": sorted(names)},
            {"type": "string", "pattern": MCP_TOOL_GLOB, "maxLength": 64},
        ],
    }
    for schema in schemas.values():
        tools = schema.get("properties", {}).get("tools")
        if tools is None:
            continue
        for option in tools.get("anyOf", [tools]):
            # a list of names; a list of tool objects (a refresh's answer) keeps its schema
            if option.get("type") == "array" and option.get("items", {}).get("type") == "string":
                option["items"] = {"$ref": REF + "ToolName"}


def declare_common_responses(document: dict[str, Any]) -> None:
    problem = {"application/problem+json": {"schema": {"$ref": REF + "Problem"}}}
    for _path, _method, operation in _operations(document):
        responses = operation.setdefault("responses", {})
        responses.setdefault(
            "500",
            {
                "description": "An internal error; the problem's `reference` is in the log",
                "content": problem,
            },
        )
        created = responses.get("201")
        if created is not None:
            created.setdefault("headers", {})["Location"] = {
                "description": "Where the created resource (or the list holding it) is read",
                "schema": {"type": "string"},
            }


def make_security_optional(document: dict[str, Any], scheme: str) -> None:
    for _path, _method, operation in _operations(document):
        operation.pop("security", None)
    document["security"] = [{scheme: []}, {}]


def add_links(document: dict[str, Any], creators: dict[str, tuple[str, str]]) -> None:
    """`creators`: operationId of a create → (path parameter it fills, JSON pointer of the id
    in its 201 body). Every operation with that path parameter becomes a link target."""
    for _path, _method, operation in _operations(document):
        spec = creators.get(operation.get("operationId", ""))
        created = operation.get("responses", {}).get("201")
        if spec is None or created is None:
            continue
        parameter, pointer = spec
        links = created.setdefault("links", {})
        for _target_path, _target_method, target in _operations(document):
            names = {p.get("name") for p in target.get("parameters", []) if p.get("in") == "path"}
            if names == {parameter}:
                links[target["operationId"]] = {
                    "operationId": target["operationId"],
                    "parameters": {parameter: f"$response.body#{pointer}"},
                }
