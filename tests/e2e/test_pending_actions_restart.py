"""Pending actions are rows of the database: a SIGKILL of every process loses none, and
a person resolves them afterwards on a new server, whose runner finishes the turn."""

from __future__ import annotations

import signal

import pytest

from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job, wait_status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


async def test_a_pending_action_survives_a_kill_of_every_process_and_resolves_after(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    call = tool_use("current_time", {})
    fake_llm.reply(call)
    fake_llm.reply(text("It is now."))
    first = strata_procs.serve()
    async with first.client() as client:
        rules = [{"tool": "current_time", "effect": "ask"}]
        session_id = await new_session(client, tool_policy=rules)
        sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "time?"})
        job_id = sent.json()["job_id"]
        await wait_status(client, job_id, {"waiting_human"}, seconds=60)

    assert first.kill() == -signal.SIGKILL
    second = strata_procs.serve()
    async with second.client() as client:
        job = (await client.get(f"/jobs/{job_id}")).json()
        assert job["status"] == "waiting_human"
        [action] = job["required_action"]
        assert action["tool_use_id"] == call.id

        resolved = await client.post(
            f"/jobs/{job_id}/actions/{action['id']}", json={"decision": "allow"}
        )
        assert resolved.status_code == 200, resolved.text
        ended = await wait_job(client, job_id, seconds=60)

        assert ended["status"] == "succeeded", ended
        assert ended["result_text"] == "It is now."
        assert_log_consistent(await items(client, session_id))
    assert len(fake_llm.requests) == 2
