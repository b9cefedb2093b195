"""A chat turn whose runner lost its lease while an MCP call ran: the runner that resumes
it runs again only the call of a trusted server's tool declaring readOnlyHint (or
idempotentHint); any other call's result says it was interrupted, its effect unknown.
The server is the suite's fault server, the operator's stdio one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.domain.tool_policy import Effect, RuleBounds, ToolPolicyRule
from app.mcp.tools import INTERRUPTED
from app.services.chat import IfBusy, send_message
from app.services.sessions import create_session
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.mcp import servers_file
from tests.support.runners import agent_settings, has_status, job_of, log_of, running

pytestmark = pytest.mark.timeout(120)


async def test_a_resumed_turn_reruns_only_a_read_only_mcp_call(
    make_settings: Any, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    mcp = {
        "mcp_servers_file": servers_file(tmp_path),
        "mcp_connect_timeout_seconds": 30.0,
        # runner A's hung call ends after its lease, so its writes are fenced
        "mcp_call_timeout_seconds": 20.0,
    }
    late = agent_settings(
        make_settings,
        fake_llm,
        job_lease_seconds=5.0,
        job_heartbeat_seconds=3600.0,
        worker_concurrency=1,
        **mcp,
    )
    prompt = agent_settings(make_settings, fake_llm, job_lease_seconds=30.0, **mcp)
    fake_llm.reply(
        tool_use("mcp__faults__read_clock", {}, id="toolu_clock"),
        tool_use("mcp__faults__hang", {}, id="toolu_hang"),
    )
    fake_llm.reply("Resumed.")  # B

    async with (
        runtime(late, with_runner=False) as a_parts,
        runtime(prompt, with_runner=False) as b_parts,
    ):

        async def enqueue(db: Any) -> str:
            session = await create_session(
                db,
                "acme",
                mcp=[{"server": "faults", "tools": ["read_clock", "hang"]}],
                tool_policy=[ToolPolicyRule(tool="mcp__faults__hang", effect=Effect.allow)],
                policy_bounds=RuleBounds(a_parts.tools.names, late.tool_policy_max_rules),
            )
            return (await send_message(db, "acme", session.id, "go", IfBusy.enqueue)).id

        job_id = await a_parts.database.write(enqueue)
        async with running(a_parts, late, "runner-a"):
            await wait_until(lambda: _called(a_parts.database, job_id), seconds=60)
            async with running(b_parts, prompt, "runner-b"):
                await wait_until(lambda: has_status(b_parts.database, job_id, TERMINAL), seconds=90)
        job = await job_of(b_parts.database, job_id)
        log = await log_of(b_parts.database, job.session_id)

    assert (job.status, job.attempts) == ("succeeded", 2)
    results = {i["tool_use_id"]: i for i in log if i["kind"] == "tool_result"}
    assert (results["toolu_clock"]["content"], results["toolu_clock"]["is_error"]) == (
        "12:00",
        False,
    )
    assert (results["toolu_hang"]["content"], results["toolu_hang"]["is_error"]) == (
        INTERRUPTED,
        True,
    )


async def _called(database: Any, job_id: str) -> bool:
    """Whether the job's response with the calls is in the log (they run after it)."""
    job = await job_of(database, job_id)
    log = await log_of(database, job.session_id)
    return any(i["kind"] == "assistant_message" for i in log)
