"""The OpenAPI document is as strict and as plain as the server (app/api/openapi_contract.py)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.openapi import NAMED_ENUMS
from app.api.openapi_contract import HTTP_METHODS, SPARSE_SCHEMAS
from app.domain.errors import InvalidInput
from app.memory.timeref import parse_time_ref
from app.services.workspaces import _check_segments
from tests.support.apps import serve
from tests.support.chat import new_session

DOCUMENT: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "openapi" / "openapi.json").read_text("utf-8")
)
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]


def _operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in DOCUMENT["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                yield path, method, item[method]


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def test_every_request_body_has_an_example() -> None:
    for path, method, operation in _operations():
        for media, content in operation.get("requestBody", {}).get("content", {}).items():
            ref = content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            has = (
                "example" in content or "examples" in content or "examples" in SCHEMAS.get(ref, {})
            )
            assert has, f"{method.upper()} {path} ({media}) has no example"


def test_every_operation_declares_500_and_every_201_its_location() -> None:
    for path, method, operation in _operations():
        responses = operation["responses"]
        assert "500" in responses, f"{method.upper()} {path}"
        if "201" in responses:
            assert "Location" in responses["201"].get("headers", {}), f"{method.upper()} {path}"


def test_the_operations_that_admit_work_declare_429() -> None:
    admitting = [
        ("post", "/sessions/{session_id}/messages"),
        ("post", "/jobs"),
        ("post", "/jobs/{job_id}/start"),
        ("post", "/hooks/claude-code"),
    ]
    for method, path in admitting:
        assert "429" in DOCUMENT["paths"][path][method]["responses"], path


def test_a_bearer_key_is_declared_once_and_optional() -> None:
    assert DOCUMENT["security"] == [{"HTTPBearer": []}, {}]
    assert all("security" not in operation for _, _, operation in _operations())


def test_shared_enums_are_named_schemas_used_everywhere() -> None:
    for name, values in NAMED_ENUMS.items():
        assert SCHEMAS[name]["enum"] == list(values)
    inline = [
        node["enum"]
        for key, schema in [("paths", DOCUMENT["paths"]), *SCHEMAS.items()]
        if key not in NAMED_ENUMS
        for node in _nodes(schema)
        if isinstance(node.get("enum"), list)
        and frozenset(node["enum"]) in {frozenset(v) for v in NAMED_ENUMS.values()}
    ]
    assert inline == []


def test_fields_every_answer_has_are_required() -> None:
    for name in ("SessionPublic", "JobPublic", "Task", "AssistantMessageItem", "Usage", "Health"):
        schema = SCHEMAS[name]
        assert set(schema["required"]) == set(schema["properties"]), name
    assert "instance" not in SCHEMAS["Problem"].get("required", [])
    assert not SPARSE_SCHEMAS & {"SessionPublic", "JobPublic"}


def test_cursors_and_stream_positions_say_their_form() -> None:
    parameters = {
        (path, p["name"]): p["schema"]
        for path, _, operation in _operations()
        for p in operation.get("parameters", [])
    }
    for path in ("/sessions", "/jobs", "/webhooks", "/sessions/{session_id}/items"):
        schema = parameters[(path, "after")]
        patterns = [s.get("pattern") for s in schema.get("anyOf", [schema])]
        assert any(patterns), path
    stream = parameters[("/jobs/{job_id}/events", "Last-Event-ID")]
    assert any(s.get("pattern") for s in stream.get("anyOf", [stream]))


@pytest.mark.parametrize(
    "reference",
    [
        "14:23:05",
        "14:23",
        "14:23-14:30",
        "23:58:00 \u2013 00:02",
        "2026-04-16 14:23:05",
        "2026-04-16 14:23",
        "2026-04-16 23:58-00:02",
        "2026-04-16 23:58:00-00:02:30",
        "2026-04-16T14:23:05Z",
        "2026-04-16T14:23:05.250+09:00",
    ],
)
def test_the_detail_path_declares_every_time_reference_the_server_reads(reference: str) -> None:
    (detail,) = [p for p in DOCUMENT["paths"] if p.endswith("/detail/{time}")]
    (time,) = [p for p in DOCUMENT["paths"][detail]["get"]["parameters"] if p["name"] == "time"]

    parse_time_ref(reference)  # the server reads it
    assert re.fullmatch(time["schema"]["pattern"], reference), reference


def test_the_detail_path_admits_exactly_the_calendars_dates() -> None:
    """Every real date, the 29th to the 31st and leap days included (a pattern that stopped
    at the 28th refused a tenth of all days with a 422), and no impossible one."""
    (detail,) = [p for p in DOCUMENT["paths"] if p.endswith("/detail/{time}")]
    (time,) = [p for p in DOCUMENT["paths"][detail]["get"]["parameters"] if p["name"] == "time"]
    pattern = re.compile(time["schema"]["pattern"])
    for year in [1000, 1600, 1700, 1900, 1999, 2000, 2024, 2026, 2100, 2400, 8999]:
        for month in range(1, 13):
            for day in range(1, 33):
                text = f"{year:04d}-{month:02d}-{day:02d} 10:00"
                try:
                    dt.date(year, month, day)
                except ValueError:
                    assert not pattern.fullmatch(text), text
                else:
                    assert pattern.fullmatch(text), text
                    parse_time_ref(text)
    assert not pattern.fullmatch("0999-01-01 10:00")
    assert not pattern.fullmatch("9000-01-01 10:00")


@pytest.mark.parametrize("replay", [False, True])
async def test_created_resources_carry_their_location(
    client: httpx.AsyncClient, replay: bool
) -> None:
    headers = {"Idempotency-Key": "k-1"} if replay else {}
    session = await client.post("/sessions", json={}, headers=headers)
    if replay:
        session = await client.post("/sessions", json={}, headers=headers)
        assert session.headers["idempotent-replayed"] == "true"
    session_id = session.json()["id"]

    assert session.headers["location"] == f"/sessions/{session_id}"
    assert (await client.get(session.headers["location"])).json()["id"] == session_id


async def test_every_create_answers_with_a_location_that_reads_it(make_settings: Any) -> None:
    settings = make_settings(webhook_allow_private=True, run_worker_in_server=False)
    async with serve(settings) as (_, client):
        session_id = await new_session(client)
        task = await client.post(f"/sessions/{session_id}/tasks", json={"subject": "s"})
        item = await client.post(
            f"/sessions/{session_id}/items", json={"kind": "system", "text": "note"}
        )
        job = await client.post("/jobs", json={"instruction": "x", "session_id": session_id})
        comment = await client.post(f"/jobs/{job.json()['id']}/comments", json={"body": "c"})
        hook = await client.post("/webhooks", json={"url": "http://127.0.0.1:9/h", "events": ["*"]})
        read = {
            name: (await client.get(answer.headers["location"])).json()
            for name, answer in {"task": task, "item": item, "job": job, "comment": comment}.items()
        }

    assert read["task"]["taskid"] == 1
    assert read["item"]["data"][0]["text"] == "note"
    assert read["job"]["id"] == job.json()["id"]
    assert read["comment"]["data"][0]["body"] == "c"
    assert hook.headers["location"] == f"/webhooks/{hook.json()['id']}"


def test_every_item_kind_is_described_in_the_document() -> None:
    """A client reading only the document learns what each item kind is (`task_event`
    included), without the README."""
    schemas = DOCUMENT["components"]["schemas"]
    for kind in schemas["ItemKind"]["enum"]:
        described = [
            schema.get("description", "")
            for name, schema in schemas.items()
            if name.endswith("Item") and schema.get("description", "").startswith(f"`{kind}`")
        ]
        assert described, kind


def _server_accepts(path: str) -> bool:
    try:
        _check_segments("input", path)
    except InvalidInput:
        return False
    return True


def test_the_workspace_path_pattern_admits_exactly_the_paths_the_server_accepts() -> None:
    """Every string of up to six characters from an alphabet of the cases that matter
    (dots, `%` and hex digits, separators, NUL): the document's pattern and the server's
    check agree on each (a backslash, say, is refused by both)."""
    operations = [(p, m, o) for p, m, o in _operations() if "/files/" in p]
    patterns = {
        parameter["schema"].get("pattern")
        for _, _, operation in operations
        for parameter in operation["parameters"]
        if parameter["name"] == "path"
    }
    assert len(operations) >= 3 and len(patterns) == 1 and None not in patterns, patterns
    pattern = re.compile(str(patterns.pop()))
    alphabet = "a.%2e/\\\x00G"
    for length in range(7):
        for letters in itertools.product(alphabet, repeat=length):
            path = "".join(letters)
            assert bool(pattern.fullmatch(path)) == _server_accepts(path), repr(path)


async def test_every_path_allows_the_methods_the_document_lists(
    client: httpx.AsyncClient,
) -> None:
    """`Allow` (on a 405, here to OPTIONS) names the methods the document has for that
    path, a download under `/files/{area}/{path}` included, for input/ as elsewhere."""
    job_id = (await client.post("/jobs", json={"instruction": "x", "start": False})).json()["id"]
    values = {"job_id": job_id, "path": "a.txt", "time": "14:23", "taskid": "1"}
    for template, item in DOCUMENT["paths"].items():
        documented = {method.upper() for method in HTTP_METHODS if method in item}
        url = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x_1"), template)

        response = await client.options(url)

        assert response.status_code == 405, (template, response.status_code)
        allowed = {method.strip() for method in response.headers["allow"].split(",")}
        assert allowed == documented, template


def test_a_list_of_tools_as_objects_keeps_its_schema_not_the_tool_names() -> None:
    """`ToolName` types lists of names (a session's `tools`); a refresh's `tools` are
    objects, which a client generated as names would mistype."""
    assert SCHEMAS["McpRefresh"]["properties"]["tools"]["items"] == {
        "$ref": "#/components/schemas/McpToolPublic"
    }
    assert SCHEMAS["SessionCreate"]["properties"]["tools"]["anyOf"][0]["items"] == {
        "$ref": "#/components/schemas/ToolName"
    }


def test_every_operation_says_more_than_its_summary() -> None:
    """spectral's `operation-description`: a reader (and a generated client's docstring)
    gets what an operation answers beyond its one-line summary."""
    assert [
        f"{method.upper()} {path}"
        for path, method, op in _operations()
        if not op.get("description")
    ] == []
