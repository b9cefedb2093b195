"""Compaction keeps every task, by construction: snapshot, TaskList call, and replay."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI

from app.main import create_app
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session
from tests.support.tools import agent_tools


async def _tasks_of_every_status(client: httpx.AsyncClient, session_id: str) -> list[Any]:
    for subject in ("parse input", "write tests", "drop legacy path"):
        await client.post(f"/sessions/{session_id}/tasks", json={"subject": subject})
    await client.patch(f"/sessions/{session_id}/tasks/2", json={"status": "completed"})
    await client.patch(f"/sessions/{session_id}/tasks/3", json={"status": "deleted"})
    return list((await client.get(f"/sessions/{session_id}/tasks")).json()["data"])


async def test_manual_compaction_opens_a_segment_with_summary_snapshot_and_task_list(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    tasks_before = await _tasks_of_every_status(agent_client, session_id)
    fake_llm.reply(text("Working on the parser."))
    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
    )
    fake_llm.reply(text("SUMMARY: parser half done."))

    compacted = await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    assert compacted.status_code == 200, compacted.text
    assert compacted.json()["status"] == "succeeded"
    summary_request = fake_llm.requests[1].body
    assert summary_request["model"] == "claude-haiku-4-5-20251001"
    assert "tools" not in summary_request
    prompt = summary_request["messages"][0]["content"][0]["text"]
    assert "Working on the parser." in prompt
    assert all(subject in prompt for subject in ("parse input", "write tests", "drop legacy"))

    fake_llm.reply(text("Continuing."))
    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "next"}
    )
    messages = fake_llm.requests[2].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    opening = [block["text"] for block in messages[0]["content"]]
    assert "SUMMARY: parser half done." in opening[0]
    assert all(s in opening[1] for s in ("parse input", "completed", "deleted"))
    assert messages[1]["content"][0]["name"] == "TaskList"
    task_list_result = messages[2]["content"][0]
    assert task_list_result["type"] == "tool_result"
    assert all(s in task_list_result["content"] for s in ("[1]", "[2]", "[3]"))
    assert messages[2]["content"][-1]["text"] == "next"
    assert (await agent_client.get(f"/sessions/{session_id}/tasks")).json()["data"] == tasks_before
    session = (await agent_client.get(f"/sessions/{session_id}")).json()
    assert session["segment"] == 1
    assert_log_consistent(await items(agent_client, session_id))


async def test_the_compaction_summary_request_marks_no_cache_breakpoint(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """Its prompt is a transcript no later request repeats: `cache_control` on it would buy
    a cache write (1.25x its input) that is never read."""
    session_id = await new_session(agent_client)
    fake_llm.reply(text("Working on the parser."))
    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
    )
    fake_llm.reply(text("SUMMARY: parser half done."))

    compacted = await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    assert compacted.json()["status"] == "succeeded"
    assert "cache_control" not in json.dumps(fake_llm.requests[1].body)


async def test_a_failing_summary_is_retried_twice_then_changes_nothing(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url, llm_max_retries=0, worker_poll_seconds=0.05
    )
    app: FastAPI = create_app(settings, tools=agent_tools())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client)
            await client.post(f"/sessions/{session_id}/tasks", json={"subject": "keep me"})
            fake_llm.error(500)
            fake_llm.error(500)
            fake_llm.error(500)
            before = await items(client, session_id)

            compacted = await client.post(
                f"/sessions/{session_id}/compact", params={"wait": "true"}
            )

            assert compacted.status_code == 502
            assert compacted.json()["type"] == "urn:strata:problem:compaction-failed"
            job = compacted.json()["job"]
            assert job["status"] == "failed"
            assert job["error"]["type"] == "urn:strata:problem:compaction-failed"
            assert len(fake_llm.requests) == 3
            assert await items(client, session_id) == before
            assert (await client.get(f"/sessions/{session_id}")).json()["segment"] == 0
            fake_llm.reply(text("still here"))
            reply = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
            )
            assert reply.json()["text"] == "still here"


async def test_automatic_compaction_at_the_force_threshold_keeps_the_turn_going(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        context_window_tokens=1000,
        worker_poll_seconds=0.05,
    )
    app: FastAPI = create_app(settings, tools=agent_tools())
    fake_llm.reply(tool_use("TaskCreate", {"subject": "big job"}), usage={"input_tokens": 400})
    fake_llm.reply(tool_use("echo", {"text": "x" * 10}), usage={"input_tokens": 960})
    fake_llm.reply(text("AUTO SUMMARY"))
    fake_llm.reply(text("Done after compaction."), usage={"input_tokens": 200})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client)

            reply = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
            )

            assert reply.json()["text"] == "Done after compaction."
            after = fake_llm.requests[3].body["messages"]
            assert "AUTO SUMMARY" in after[0]["content"][0]["text"]
            assert "big job" in after[0]["content"][1]["text"]
            assert after[1]["content"][0]["name"] == "TaskList"
            log = await items(client, session_id)
            assert [i["kind"] for i in log if i["segment"] == 1][:4] == [
                "compact_summary",
                "system",
                "assistant_message",
                "tool_result",
            ]
            assert_log_consistent(log)
            tasks = (await client.get(f"/sessions/{session_id}/tasks")).json()["data"]
            assert [t["subject"] for t in tasks] == ["big job"]


async def test_a_long_task_list_enters_the_compacted_segment_within_its_budget(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """The snapshot and the TaskList result a compaction opens its segment with held
    every task whole: 60 tasks with long descriptions put ~600 KB into every request after."""
    session_id = await new_session(agent_client)
    for n in range(60):
        task = {"subject": f"task {n + 1}", "description": "why " * 2_500}
        await agent_client.post(f"/sessions/{session_id}/tasks", json=task)
    fake_llm.reply(text("SUMMARY: sixty tasks."))
    await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    fake_llm.reply(text("On it."))
    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "next"}
    )

    messages = fake_llm.requests[-1].body["messages"]
    snapshot = messages[0]["content"][1]["text"]
    listed = messages[2]["content"][0]["content"]
    assert len(snapshot) < 8_000 + 200  # the budget, and the note around it
    assert "of 60 tasks shown (" in snapshot and "task 1" in snapshot
    assert len(listed) < 8_000 + 200
    assert len(str(fake_llm.requests[-1].body)) < 40_000


async def test_the_users_message_follows_an_automatic_compaction_before_the_first_request(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """A turn whose first request is at the force threshold is compacted first; the
    request then answered holds the new segment's opening (seed 001: summary, snapshot,
    TaskList call and result) and after it the user's new message, word for word."""
    settings = make_settings(
        anthropic_base_url=fake_llm.url, context_window_tokens=1000, worker_poll_seconds=0.05
    )
    app: FastAPI = create_app(settings, tools=agent_tools())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client)
            await client.post(f"/sessions/{session_id}/tasks", json={"subject": "big job"})
            fake_llm.reply(text("A long answer. " * 260))  # ~3,900 characters
            await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "one"}
            )
            fake_llm.reply(text("AUTO SUMMARY"))
            fake_llm.reply(text("Answered after compaction."))
            question = "Now the second question:\nwhat changed?"

            reply = await client.post(
                f"/sessions/{session_id}/messages",
                params={"wait": "true"},
                json={"text": question},
            )

            assert reply.json()["text"] == "Answered after compaction."
            summarized = fake_llm.requests[1].body["messages"][0]["content"][0]["text"]
            assert question not in summarized
            messages = fake_llm.requests[2].body["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant", "user"]
            opening = messages[0]["content"]
            assert "AUTO SUMMARY" in opening[0]["text"]
            assert "big job" in opening[1]["text"] and len(opening) == 2
            assert messages[1]["content"][0]["name"] == "TaskList"
            last = messages[2]["content"]
            assert last[0]["type"] == "tool_result"
            assert (last[-1]["type"], last[-1]["text"]) == ("text", question)
            assert_log_consistent(await items(client, session_id))


async def test_a_tool_less_turn_compacted_before_its_first_request_ends_with_the_users_text(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url, context_window_tokens=1000, worker_poll_seconds=0.05
    )
    app: FastAPI = create_app(settings, tools=agent_tools())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client, tools=[])
            fake_llm.reply(text("A long answer. " * 260))
            await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "one"}
            )
            fake_llm.reply(text("AUTO SUMMARY"))
            fake_llm.reply(text("Answered."))

            await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "two?"}
            )

            messages = fake_llm.requests[2].body["messages"]
            assert [m["role"] for m in messages] == ["user"]
            blocks = messages[0]["content"]
            assert "AUTO SUMMARY" in blocks[0]["text"]
            assert "task list is empty" in blocks[1]["text"]
            assert blocks[-1]["text"] == "two?" and len(blocks) == 3
