"""Tool policies in the API: the tenant's rules, a session's, a movement's and the
operator's file; a session's tools with their policies; which rule decides a call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.apps import serve

BASH_ASKS = {"tool": "TaskCreate", "effect": "ask"}


def assert_422_at(response: httpx.Response, field: str) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    assert problem["detail"].startswith(f"{field}: "), problem["detail"]
    return problem


async def new_session(client: httpx.AsyncClient, **fields: Any) -> str:
    created = await client.post("/sessions", json=fields)
    assert created.status_code == 201, created.text
    session_id: str = created.json()["id"]
    return session_id


async def check(client: httpx.AsyncClient, session_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/tool-policy/check", json=body)


# --- the tenant's layer ------------------------------------------------------------------


async def test_a_tenant_without_rules_has_none(client: httpx.AsyncClient) -> None:
    answer = await client.get("/tool-policy")

    assert answer.status_code == 200
    assert answer.json() == {"rules": [], "updated_at": None}


async def test_a_tenants_rules_are_replaced_whole_and_read_back(
    client: httpx.AsyncClient,
) -> None:
    rules = [
        {"tool": "Task*", "effect": "ask", "expires_in": 600, "on_timeout": "cancel"},
        {"tool": "TaskCreate", "input": {"subject": "chore*"}, "effect": "allow"},
    ]
    await client.put("/tool-policy", json={"rules": [{"tool": "Detail", "effect": "deny"}]})

    replaced = await client.put("/tool-policy", json={"rules": rules})
    read = (await client.get("/tool-policy")).json()

    assert replaced.status_code == 200, replaced.text
    assert [r["tool"] for r in read["rules"]] == ["Task*", "TaskCreate"]
    assert read["rules"][0]["on_timeout"] == "cancel"
    assert read["rules"][1]["input"] == {"subject": "chore*"}
    assert read["updated_at"] is not None
    assert replaced.json() == read


async def test_an_empty_list_removes_the_tenants_rules(client: httpx.AsyncClient) -> None:
    await client.put("/tool-policy", json={"rules": [BASH_ASKS]})

    await client.put("/tool-policy", json={"rules": []})

    assert (await client.get("/tool-policy")).json()["rules"] == []


async def test_a_tenant_glob_that_cannot_compile_is_a_422_naming_its_field(
    client: httpx.AsyncClient,
) -> None:
    rules = [BASH_ASKS, BASH_ASKS, {"tool": "Task[", "effect": "deny"}]

    answer = await client.put("/tool-policy", json={"rules": rules})

    problem = assert_422_at(answer, "rules[2].tool")
    assert problem["errors"][0]["loc"] == ["body", "rules", 2, "tool"]
    assert (await client.get("/tool-policy")).json()["rules"] == []


async def test_a_tenant_rule_naming_no_tool_is_a_422_naming_its_field(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.put(
        "/tool-policy", json={"rules": [BASH_ASKS, {"tool": "TaskCraete", "effect": "deny"}]}
    )

    assert assert_422_at(answer, "rules[1].tool")["field"] == "rules[1].tool"


async def test_a_rule_on_mcp_tools_is_kept_though_nothing_offers_them_yet(
    client: httpx.AsyncClient,
) -> None:
    rule = {"tool": "mcp__github__*", "effect": "deny"}

    answer = await client.put("/tool-policy", json={"rules": [rule]})

    assert answer.status_code == 200, answer.text


async def test_an_input_glob_that_cannot_compile_is_a_422_naming_its_field(
    client: httpx.AsyncClient,
) -> None:
    rule = {"tool": "TaskCreate", "input": {"subject": "[z-a]"}, "effect": "ask"}

    answer = await client.put("/tool-policy", json={"rules": [rule]})

    assert_422_at(answer, "rules[0].input.subject")


async def test_more_rules_than_a_layer_holds_are_a_422(make_settings: Any) -> None:
    async with serve(make_settings(tool_policy_max_rules=2)) as (_, client):
        answer = await client.put("/tool-policy", json={"rules": [BASH_ASKS] * 3})

    assert_422_at(answer, "rules")


@pytest.fixture
async def two_tenants(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings(api_keys="acme:key-a,globex:key-b")) as (_, client):
        yield client


async def test_a_tenants_rules_are_its_own(two_tenants: httpx.AsyncClient) -> None:
    acme = {"Authorization": "Bearer key-a"}
    globex = {"Authorization": "Bearer key-b"}
    await two_tenants.put("/tool-policy", json={"rules": [BASH_ASKS]}, headers=acme)

    theirs = await two_tenants.get("/tool-policy", headers=globex)

    assert theirs.json()["rules"] == []


# --- the session's layer -----------------------------------------------------------------


async def test_a_session_keeps_the_tool_policy_it_was_created_with(
    client: httpx.AsyncClient,
) -> None:
    rules = [{"tool": "TaskCreate", "effect": "ask", "reason": "a person plans"}]

    session_id = await new_session(client, tool_policy=rules)
    shown = (await client.get(f"/sessions/{session_id}")).json()["tool_policy"]

    assert [(r["tool"], r["effect"], r["reason"]) for r in shown] == [
        ("TaskCreate", "ask", "a person plans")
    ]


async def test_a_session_without_rules_shows_an_empty_tool_policy(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)

    assert (await client.get(f"/sessions/{session_id}")).json()["tool_policy"] == []


async def test_a_sessions_rule_naming_no_tool_is_a_422_naming_its_field(
    client: httpx.AsyncClient,
) -> None:
    rules = [BASH_ASKS, BASH_ASKS, {"tool": "Bsah", "effect": "deny"}]

    answer = await client.post("/sessions", json={"tool_policy": rules})

    assert assert_422_at(answer, "tool_policy[2].tool")["field"] == "tool_policy[2].tool"


async def test_a_sessions_unknown_effect_is_a_422_naming_its_field(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.post(
        "/sessions", json={"tool_policy": [{"tool": "TaskCreate", "effect": "maybe"}]}
    )

    assert_422_at(answer, "tool_policy[0].effect")


async def test_on_timeout_without_expires_in_is_a_422_naming_it(
    client: httpx.AsyncClient,
) -> None:
    rule = {"tool": "TaskCreate", "effect": "ask", "on_timeout": "deny"}

    answer = await client.post("/sessions", json={"tool_policy": [rule]})

    assert_422_at(answer, "tool_policy[0].on_timeout")


async def test_patch_replaces_a_sessions_tool_policy_whole(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client, tool_policy=[BASH_ASKS, BASH_ASKS])

    patched = await client.patch(
        f"/sessions/{session_id}", json={"tool_policy": [{"tool": "Detail", "effect": "deny"}]}
    )

    assert patched.status_code == 200, patched.text
    assert [r["tool"] for r in patched.json()["tool_policy"]] == ["Detail"]


async def test_patch_without_tool_policy_keeps_it(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client, tool_policy=[BASH_ASKS])

    patched = await client.patch(f"/sessions/{session_id}", json={"title": "renamed"})

    assert [r["tool"] for r in patched.json()["tool_policy"]] == ["TaskCreate"]


async def test_a_patched_bad_rule_is_a_422_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client, tool_policy=[BASH_ASKS])

    answer = await client.patch(
        f"/sessions/{session_id}", json={"tool_policy": [{"tool": "Nope", "effect": "deny"}]}
    )

    assert_422_at(answer, "tool_policy[0].tool")
    shown = (await client.get(f"/sessions/{session_id}")).json()["tool_policy"]
    assert [r["tool"] for r in shown] == ["TaskCreate"]


# --- a session's tools -------------------------------------------------------------------


async def test_a_sessions_tools_each_carry_their_policy_and_the_rules_naming_them(
    client: httpx.AsyncClient,
) -> None:
    await client.put("/tool-policy", json={"rules": [{"tool": "Task*", "effect": "ask"}]})
    session_id = await new_session(
        client,
        tools=["TaskCreate", "current_time"],
        tool_policy=[{"tool": "TaskCreate", "input": {"subject": "chore*"}, "effect": "allow"}],
    )

    answer = await client.get(f"/sessions/{session_id}/tools")

    assert answer.status_code == 200, answer.text
    tools = {tool["name"]: tool for tool in answer.json()["data"]}
    assert list(tools) == ["TaskCreate", "current_time"]
    create = tools["TaskCreate"]
    assert (create["policy"]["effect"], create["policy"]["layer"], create["policy"]["index"]) == (
        "ask",
        "tenant",
        0,
    )
    assert [(r["layer"], r["index"]) for r in create["rules"]] == [("tenant", 0), ("session", 0)]
    clock = tools["current_time"]
    assert clock["policy"] == {
        "effect": "allow",
        "layer": None,
        "index": None,
        "rule": None,
        "by_default": True,
        "default": "builtin",
    }
    assert clock["rules"] == []


async def test_a_session_offering_every_tool_lists_the_chat_tools(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)
    chat_tools = [t["name"] for t in (await client.get("/tools")).json()["data"] if t["in_chat"]]

    listed = (await client.get(f"/sessions/{session_id}/tools")).json()["data"]

    assert sorted(tool["name"] for tool in listed) == sorted(chat_tools)


async def test_the_tools_of_an_unknown_session_are_404(client: httpx.AsyncClient) -> None:
    answer = await client.get("/sessions/ses_00000000000000000000000000/tools")

    assert answer.status_code == 404


# --- which rule decides a call -----------------------------------------------------------


async def test_the_check_names_the_layer_and_rule_that_decide(client: httpx.AsyncClient) -> None:
    session_id = await new_session(
        client,
        tool_policy=[
            {"tool": "TaskCreate", "effect": "ask"},
            {"tool": "TaskCreate", "input": {"subject": "chore*"}, "effect": "allow"},
        ],
    )

    chore = await check(client, session_id, tool="TaskCreate", input={"subject": "chore: tidy"})
    other = await check(client, session_id, tool="TaskCreate", input={"subject": "deploy"})

    assert chore.status_code == 200, chore.text
    assert {k: chore.json()[k] for k in ("effect", "layer", "index", "by_default")} == {
        "effect": "allow",
        "layer": "session",
        "index": 1,
        "by_default": False,
    }
    assert chore.json()["rule"]["input"] == {"subject": "chore*"}
    assert (other.json()["effect"], other.json()["index"]) == ("ask", 0)


async def test_a_tenants_deny_is_final_over_a_sessions_allow(client: httpx.AsyncClient) -> None:
    await client.put("/tool-policy", json={"rules": [{"tool": "Detail", "effect": "deny"}]})
    session_id = await new_session(client, tool_policy=[{"tool": "*", "effect": "allow"}])

    answer = (await check(client, session_id, tool="Detail", input={})).json()

    assert (answer["effect"], answer["layer"], answer["index"]) == ("deny", "tenant", 0)


async def test_a_call_no_rule_matches_gets_its_tools_default(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    builtin = (await check(client, session_id, tool="TaskList")).json()
    mcp = (await check(client, session_id, tool="mcp__github__create_issue")).json()

    assert (builtin["effect"], builtin["by_default"]) == ("allow", True)
    assert (mcp["effect"], mcp["by_default"]) == ("ask", True)


async def test_the_check_of_an_unknown_tool_is_a_422(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    assert_422_at(await check(client, session_id, tool="Bsah"), "tool")


async def test_the_check_in_an_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    answer = await check(client, "ses_00000000000000000000000000", tool="TaskList")

    assert answer.status_code == 404


MOVEMENT_PIECE = """\
name: guarded
movements:
  - name: work
    instruction: Work.
    allowed_tools: [TaskCreate, Read]
    transitions: [COMPLETE]
    tool_policy:
      - tool: Read
        input: {path: "secrets/*"}
        effect: deny
        reason: not for agents
"""


async def test_the_check_in_a_movement_reads_its_rules(make_settings: Any, tmp_path: Path) -> None:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "guarded.yaml").write_text(MOVEMENT_PIECE, encoding="utf-8")
    async with serve(make_settings(pieces_dir=pieces)) as (_, client):
        session_id = await new_session(client)
        secret = {"path": "secrets/key"}
        inside = await check(client, session_id, tool="Read", input=secret, movement="guarded/work")
        outside = await check(client, session_id, tool="Read", input=secret)

    assert (inside.json()["effect"], inside.json()["layer"]) == ("deny", "movement")
    assert inside.json()["rule"]["reason"] == "not for agents"
    assert outside.json()["by_default"] is True


async def test_the_check_in_an_unknown_movement_is_a_422(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    no_piece = await check(client, session_id, tool="TaskList", movement="nothing/work")
    no_movement = await check(client, session_id, tool="TaskList", movement="default/nothing")

    assert_422_at(no_piece, "movement")
    assert_422_at(no_movement, "movement")


# --- the operator's layer ----------------------------------------------------------------


async def test_the_operators_rules_come_first_and_their_deny_is_final(
    make_settings: Any, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps([{"tool": "TaskCreate", "effect": "deny"}]), encoding="utf-8")
    async with serve(make_settings(tool_policy_file=policy)) as (_, client):
        session_id = await new_session(client, tool_policy=[{"tool": "*", "effect": "allow"}])
        answer = (await check(client, session_id, tool="TaskCreate")).json()

    assert (answer["effect"], answer["layer"], answer["index"]) == ("deny", "operator", 0)
