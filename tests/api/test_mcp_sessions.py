"""MCP servers attached to sessions, end to end: a scripted model calls their tools through
the fake Messages API and the next request carries the result. The servers are real: the
operator's stdio ones (mcp-server-time, the suite's fault server) under the Bash tool's
confinement, and the tenant's over Streamable HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.engine.truncation import TRUNCATION_MARKER
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import items, new_session, submit_job, wait_job
from tests.support.mcp import ALLOW_MCP, HttpServer, last_result, mcp_settings, say, servers_file
from tests.support.settings import MakeSettings

MOVEMENT = """\
name: mcp-step
description: one step that may echo through an MCP server
movements:
  - name: only
    instruction: Echo the words, then complete.
    allowed_tools: [mcp__faults__e*]
    transitions: [COMPLETE]
"""


@pytest.fixture
async def api(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "mcp-step.yaml").write_text(MOVEMENT, encoding="utf-8")
    settings = mcp_settings(
        make_settings,
        fake_llm,
        servers_file(tmp_path),
        pieces_dir=pieces,
        job_heartbeat_seconds=0.1,
        job_lease_seconds=30.0,
        mcp_allow_private=True,
    )
    async with serve(settings) as (_, client):
        yield client


async def test_the_model_calls_a_stdio_servers_tool_and_reads_its_result(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__time__get_current_time", {"timezone": "UTC"}))
    fake_llm.reply(text("It is noon somewhere."))
    session_id = await new_session(api, mcp=[{"server": "time"}])

    reply = await say(api, session_id, "what time is it?")

    assert reply["job"]["status"] == "succeeded"
    offered = {tool["name"]: tool for tool in fake_llm.requests[0].body["tools"]}
    assert offered["mcp__time__get_current_time"]["input_schema"]["type"] == "object"
    result = last_result(fake_llm)
    assert "UTC" in json.dumps(result["content"]) and not result.get("is_error")


async def test_the_model_calls_a_tenants_http_server(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, everything_http: HttpServer
) -> None:
    body = {"name": "every", "url": everything_http.url(), "trusted": True}
    assert (await api.post("/mcp-servers", json=body)).status_code == 201
    fake_llm.reply(tool_use("mcp__every__echo", {"message": "ping"}))
    fake_llm.reply(text("It said ping."))
    session_id = await new_session(api, mcp=[{"server": "every", "tools": ["echo"]}])

    await say(api, session_id, "echo ping")

    assert [t["name"] for t in fake_llm.requests[0].body["tools"] if "mcp__" in t["name"]] == [
        "mcp__every__echo"
    ]
    assert "ping" in json.dumps(last_result(fake_llm)["content"])


async def test_a_call_that_hangs_past_its_timeout_is_an_error_result_not_a_failed_turn(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, fault_http: HttpServer
) -> None:
    body = {"name": "slow", "url": fault_http.url(), "trusted": True, "timeout_s": 0.5}
    assert (await api.post("/mcp-servers", json=body)).status_code == 201
    fake_llm.reply(tool_use("mcp__slow__hang", {}))
    fake_llm.reply(text("It did not answer."))
    session_id = await new_session(api, mcp=[{"server": "slow"}], tool_policy=ALLOW_MCP)

    reply = await say(api, session_id, "wait for it")

    assert reply["job"]["status"] == "succeeded"
    result = last_result(fake_llm)
    assert result["is_error"] is True and "timeout" in json.dumps(result["content"])


async def test_a_crashed_stdio_server_is_an_error_result_the_model_reads(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__crash", {}))
    fake_llm.reply(tool_use("mcp__faults__echo", {"text": "again"}))
    fake_llm.reply(text("It came back."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    reply = await say(api, session_id, "crash it")

    assert reply["job"]["status"] == "succeeded"
    log = [i for i in await items(api, session_id) if i["kind"] == "tool_result"]
    assert log[0]["is_error"] is True and "crashed" in log[0]["content"]
    assert log[1]["content"] == "echo: again"  # a new process, started on use


async def test_a_5_mb_answer_is_cut_to_the_responses_budget(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__big", {}))
    fake_llm.reply(text("That was long."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    await say(api, session_id, "big")

    content = json.dumps(last_result(fake_llm)["content"])
    assert TRUNCATION_MARKER in content
    assert len(content) < 300_000


async def test_structured_content_without_text_is_sent_as_compact_json(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__structured", {}))
    fake_llm.reply(text("21 C."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    await say(api, session_id, "weather")

    log = [i for i in await items(api, session_id) if i["kind"] == "tool_result"]
    assert log[0]["content"] == '{"temperature":21,"unit":"C"}'


async def test_an_is_error_result_is_an_error_result(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__fails", {}))
    fake_llm.reply(text("It failed."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    await say(api, session_id, "fail")

    result = last_result(fake_llm)
    assert result["is_error"] is True and "fails" in json.dumps(result["content"])


async def test_session_tools_name_mcp_tools_by_glob(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("Nothing to do."))
    session_id = await new_session(
        api, mcp=[{"server": "faults"}], tools=["TaskList", "mcp__faults__e*"]
    )

    await say(api, session_id, "hi")

    assert [t["name"] for t in fake_llm.requests[0].body["tools"]] == [
        "TaskList",
        "mcp__faults__echo",
    ]


async def test_attaching_an_unknown_server_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post("/sessions", json={"mcp": [{"server": "nobody"}]})
    assert response.status_code == 422


async def test_attaching_more_tools_than_allowed_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post("/sessions", json={"mcp": [{"server": "many"}]})
    assert response.status_code == 422
    assert "STRATA_MCP_MAX_TOOLS" in response.text


async def test_globs_narrowing_a_large_server_attach_it(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/sessions", json={"mcp": [{"server": "many", "tools": ["t00*", "echo"]}]}
    )
    assert response.status_code == 201, response.text
    assert response.json()["mcp"] == [{"server": "many", "tools": ["t00*", "echo"]}]


async def test_a_movement_offers_the_mcp_tools_its_allowed_tools_name(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__echo", {"text": "from a movement"}))
    fake_llm.reply(
        tool_use("transition", {"next_step": "COMPLETE", "summary": "echoed"}),
    )
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    job = await submit_job(api, piece="mcp-step", session_id=session_id)
    ended = await wait_job(api, job["id"], seconds=120)

    assert ended["status"] == "succeeded", ended
    offered = [t["name"] for t in fake_llm.requests[0].body["tools"]]
    assert "mcp__faults__echo" in offered and "mcp__faults__crash" not in offered
    assert "echo: from a movement" in json.dumps(last_result(fake_llm)["content"])


async def test_the_model_reads_a_repository_through_mcp_server_git(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_llm.reply(tool_use("mcp__git__git_status", {"repo_path": str(tmp_path / "repo")}))
    fake_llm.reply(text("One file is untracked."))
    session_id = await new_session(api, mcp=[{"server": "git", "tools": ["git_status"]}])

    await say(api, session_id, "what is the state of the repository?")

    result = last_result(fake_llm)
    assert "new.txt" in json.dumps(result["content"]) and not result.get("is_error")


async def test_a_tenant_cannot_take_an_operator_servers_name(api: httpx.AsyncClient) -> None:
    response = await api.post("/mcp-servers", json={"name": "time", "url": "http://a/mcp"})
    assert response.status_code == 409
