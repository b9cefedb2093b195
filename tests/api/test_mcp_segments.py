"""A segment's MCP tools are listed once, recorded in the log (`mcp.tools_listed`), and
offered by every turn of the segment in any process: a server whose tools change between
two turns of one segment does not shift the request's tools. The server is the suite's
fault server over Streamable HTTP, whose `grow` tool adds a tool to it."""

from __future__ import annotations

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session
from tests.support.mcp import ALLOW_MCP, HttpServer, say
from tests.support.settings import MakeSettings


def mcp_tools(fake_llm: FakeMessagesAPI, request: int) -> list[str]:
    return [t["name"] for t in fake_llm.requests[request].body["tools"] if "mcp__" in t["name"]]


async def test_a_tool_list_that_changes_mid_segment_keeps_the_segments_tools(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, fault_http: HttpServer
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        job_heartbeat_seconds=0.1,
        job_lease_seconds=30.0,
        worker_poll_seconds=0.05,
        mcp_allow_private=True,
        mcp_connect_timeout_seconds=30.0,
    )
    fake_llm.reply(tool_use("mcp__growing__grow", {}))
    fake_llm.reply(text("It grew."))
    async with serve(settings) as (_, api):
        body = {"name": "growing", "url": fault_http.url(), "trusted": True}
        assert (await api.post("/mcp-servers", json=body)).status_code == 201
        session_id = await new_session(
            api, mcp=[{"server": "growing", "tools": ["gr*"]}], tool_policy=ALLOW_MCP
        )
        await say(api, session_id, "grow")
        refreshed = await api.post("/mcp-servers/growing/refresh")
        assert "mcp__growing__grown" in refreshed.text  # the server's list changed
    fake_llm.reply(text("Still the same tools."))

    # another process: nothing of the first one's memory, only the log
    async with serve(settings) as (_, api):
        await say(api, session_id, "again")

    assert mcp_tools(fake_llm, 0) == ["mcp__growing__grow"]
    assert mcp_tools(fake_llm, 2) == mcp_tools(fake_llm, 0)
