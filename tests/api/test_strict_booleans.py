"""A boolean of a request body is a JSON `true` or `false`: `"yes"`, `"false"` or `1` is a
422 naming the field, never a guess. Query flags (`?wait=true`) keep the usual forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.chat import new_session

OPENAPI = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def _boolean_fields() -> list[tuple[str, str, str]]:
    """(method, path, property) of every top-level boolean of a JSON request body."""
    document = json.loads(OPENAPI.read_text())
    schemas = document["components"]["schemas"]
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            schema = schemas[body["schema"]["$ref"].rsplit("/", 1)[1]]
            for name, prop in schema.get("properties", {}).items():
                kinds = [prop.get("type")] + [s.get("type") for s in prop.get("anyOf", [])]
                if "boolean" in kinds:
                    found.append((method, path, name))
    return found


def test_the_request_bodies_have_booleans_to_check() -> None:
    assert {("post", "/jobs", "start"), ("patch", "/webhooks/{webhook_id}", "enabled")} <= set(
        _boolean_fields()
    )


@pytest.mark.parametrize(("method", "path", "field"), _boolean_fields())
@pytest.mark.parametrize("value", ["yes", "false", 1, 0])
async def test_a_body_boolean_given_as_another_json_value_is_a_422_naming_it(
    client: httpx.AsyncClient, method: str, path: str, field: str, value: Any
) -> None:
    url = path.replace("{", "x_").replace("}", "")  # any id: the body is read first

    response = await client.request(method, url, json={field: value})

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "urn:strata:problem:validation-error"
    wrong = {"loc": ["body", field], "msg": "Input should be a valid boolean", "type": "bool_type"}
    assert wrong in problem["errors"]


async def test_a_job_posted_with_start_yes_is_refused_and_not_created(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/jobs", json={"instruction": "Do it.", "start": "yes"})

    assert response.status_code == 422
    assert response.json()["detail"] == "start: Input should be a valid boolean"
    assert (await client.get("/jobs")).json()["data"] == []


@pytest.mark.parametrize("flag", ["true", "1", "on", "yes"])
async def test_a_query_flag_keeps_the_usual_forms_of_true(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, flag: str
) -> None:
    session_id = await new_session(agent_client)
    fake_llm.reply("Hello.")

    answered = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": flag}, json={"text": "hi"}
    )

    assert answered.status_code == 200, answered.text  # waited: the reply, not a 202
