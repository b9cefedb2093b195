"""The task list survives a restart: it is replayed from the log, there is no task table.

A real `strata serve` (builtin tools, the task tools among them) runs a turn in which the
model creates tasks; a REST PATCH completes one; the server is stopped with SIGTERM and a
new process on the same database answers with the same tasks, and the agent's numbering
goes on where it stopped.
"""

from __future__ import annotations

import signal
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


async def _turn(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    response = await client.post(
        f"/sessions/{session_id}/messages",
        params={"wait": "true", "timeout": 30},
        json={"text": message},
    )
    assert response.status_code == 200, response.text
    assert response.json()["job"]["status"] == "succeeded", response.json()
    return dict(response.json())


async def _tasks(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/sessions/{session_id}/tasks")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def _brief(tasks: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
    return [(t["taskid"], t["status"], t["subject"], t["description"]) for t in tasks]


async def test_tasks_made_by_the_model_and_rest_survive_a_restart(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(
        tool_use("TaskCreate", {"subject": "read the spec", "description": "both seeds"}),
        tool_use("TaskCreate", {"subject": "write the code"}),
        tool_use("TaskCreate", {"subject": "write the tests", "description": "unit and api"}),
    )
    fake_llm.reply(tool_use("TaskUpdate", {"taskid": 2, "status": "inprogress"}))
    fake_llm.reply(tool_use("TaskUpdate", {"taskid": 9, "status": "completed"}))  # refused
    fake_llm.reply(text("Planned."))
    first = strata_procs.serve()

    async with first.client() as client:
        session_id = await new_session(client)
        await _turn(client, session_id, "plan the work")
        patched = await client.patch(
            f"/sessions/{session_id}/tasks/1", json={"status": "completed"}
        )
        assert patched.status_code == 200, patched.text
        before = await _tasks(client, session_id)
        one_before = (await client.get(f"/sessions/{session_id}/tasks/3")).json()

    assert _brief(before) == [
        (1, "completed", "read the spec", "both seeds"),
        (2, "inprogress", "write the code", ""),
        (3, "pending", "write the tests", "unit and api"),
    ]
    first.signal(signal.SIGTERM)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert first.wait(timeout=10) in (0, -signal.SIGTERM)

    second = strata_procs.serve()
    listing = tool_use("TaskList", {})
    fake_llm.reply(listing, tool_use("TaskCreate", {"subject": "ship it"}))
    fake_llm.reply(text("Resumed."))

    async with second.client() as client:
        assert await _tasks(client, session_id) == before  # timestamps included
        assert (await client.get(f"/sessions/{session_id}/tasks/3")).json() == one_before

        await _turn(client, session_id, "where were we?")

        after = await _tasks(client, session_id)
        log = await items(client, session_id)

    assert _brief(after) == [*_brief(before), (4, "pending", "ship it", "")]
    results = fake_llm.requests[-1].messages[-1]["content"]
    list_result = next(b for b in results if b.get("tool_use_id") == listing.id)
    content = list_result["content"]
    list_text = content if isinstance(content, str) else content[0]["text"]
    assert list_text.startswith(
        "[1] completed: read the spec\n    both seeds\n"
        "[2] inprogress: write the code\n"
        "[3] pending: write the tests\n    unit and api"
    )
    assert_log_consistent(log)
