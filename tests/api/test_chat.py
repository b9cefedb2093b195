from __future__ import annotations

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import assert_log_consistent, items, new_session, wait_job


async def test_multi_tool_turn_runs_tools_in_order_and_answers(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("add", {"a": 1, "b": 2}), tool_use("echo", {"text": "hi"}))
    fake_llm.reply(text("The sum is 3."))
    session_id = await new_session(agent_client)

    response = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "add 1 and 2"}
    )

    assert response.status_code == 200, response.text
    assert response.json()["text"] == "The sum is 3."
    log = await items(agent_client, session_id)
    assert [i["kind"] for i in log] == [
        "user_message",
        "assistant_message",
        "tool_result",
        "tool_result",
        "assistant_message",
    ]
    assert [i["content"] for i in log[2:4]] == ["3", "hi"]
    assert {i["turn"] for i in log} == {1}
    assert_log_consistent(log)


async def test_request_sets_cache_breakpoints_and_offers_the_tools(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("ok"))
    session_id = await new_session(agent_client, system_prompt="Be brief.")

    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    sent = fake_llm.requests[0].body
    assert sent["stream"] is True
    assert sent["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert {tool["name"] for tool in sent["tools"]} >= {"echo", "add"}


async def test_usage_is_recorded_per_request_and_summed_per_job_and_session(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(
        tool_use("echo", {"text": "x"}),
        usage={"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 50},
    )
    fake_llm.reply(text("done"), usage={"input_tokens": 120, "output_tokens": 3})
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
    )

    usage = reply.json()["job"]["usage"]
    assert usage["input_tokens"] == 220
    assert usage["output_tokens"] == 10
    assert usage["cache_read_input_tokens"] == 50
    log = await items(agent_client, session_id)
    assert [i["usage"]["input_tokens"] for i in log if i["kind"] == "assistant_message"] == [
        100,
        120,
    ]
    session = (await agent_client.get(f"/sessions/{session_id}")).json()
    assert session["usage"]["input_tokens"] == 220


async def test_invalid_tool_input_becomes_an_error_result_the_model_reads(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("add", {"a": "one", "b": 2}))
    fake_llm.reply(text("Sorry, fixed."))
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "add"}
    )

    assert reply.json()["job"]["status"] == "succeeded"
    result = next(i for i in await items(agent_client, session_id) if i["kind"] == "tool_result")
    assert result["is_error"] is True
    assert "a" in result["content"] and "invalid input" in result["content"]
    second_request = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert second_request["type"] == "tool_result" and second_request["is_error"] is True


async def test_unknown_tools_and_crashing_tools_become_error_results(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("teleport", {}), tool_use("boom", {}), tool_use("refuse", {}))
    fake_llm.reply(text("I could not."))
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "try"}
    )

    assert reply.json()["job"]["status"] == "succeeded"
    results = [i for i in await items(agent_client, session_id) if i["kind"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "unknown tool 'teleport'" in results[0]["content"]
    assert "RuntimeError" in results[1]["content"]
    assert results[2]["content"] == "not allowed here"


async def test_overloaded_once_then_success_is_retried(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.error(529)
    fake_llm.reply(text("Here now."))
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hello"}
    )

    assert reply.json()["text"] == "Here now."
    assert len(fake_llm.requests) == 2


async def test_retries_exhausted_fail_the_job_and_leave_the_session_usable(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.error(529)
    fake_llm.error(529)
    fake_llm.error(529)
    session_id = await new_session(agent_client)

    failed = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hello"}
    )

    job = failed.json()["job"]
    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:llm-overloaded"
    assert "529" in job["error"]["detail"]
    fake_llm.reply(text("Back."))
    again = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "again"}
    )
    assert again.json()["text"] == "Back."


async def test_max_iterations_fail_the_job_with_a_clear_error(
    make_settings: object, fake_llm: FakeMessagesAPI
) -> None:
    from app.main import create_app
    from tests.support.tools import agent_tools

    settings = make_settings(  # type: ignore[operator]
        anthropic_base_url=fake_llm.url, agent_max_iterations=2, worker_poll_seconds=0.05
    )
    app = create_app(settings, tools=agent_tools())
    fake_llm.reply(tool_use("echo", {"text": "1"}))
    fake_llm.reply(tool_use("echo", {"text": "2"}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client)
            reply = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "loop"}
            )
            assert reply.status_code == 409  # the limit is the session's state, not a fault
            job = reply.json()["job"]
            assert job["status"] == "failed"
            assert job["error"]["type"] == "urn:strata:problem:agent-max-iterations"
            assert_log_consistent(await items(client, session_id))


async def test_without_an_llm_configured_a_chat_job_fails_at_once_saying_what_to_set(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)

    reply = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    assert reply.status_code == 503
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.json()["type"] == "urn:strata:problem:llm-not-configured"
    assert "ANTHROPIC_API_KEY" in reply.json()["detail"]
    job = reply.json()["job"]
    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:llm-not-configured"
    assert (await client.get("/readyz")).json()["llm"] == "not_configured"


async def test_two_messages_at_once_run_as_two_turns_one_after_the_other(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("echo", {"text": "first"}), delay=0.2)
    fake_llm.reply(text("one"))
    fake_llm.reply(text("two"))
    session_id = await new_session(agent_client)

    first = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "A"})
    second = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "B"})

    assert (first.status_code, second.status_code) == (202, 202)
    assert (first.json()["turn"], second.json()["turn"]) == (1, 2)
    assert (await wait_job(agent_client, second.json()["job_id"]))["status"] == "succeeded"
    log = await items(agent_client, session_id)
    assert [i["turn"] for i in log] == sorted(i["turn"] for i in log)
    assert [(i["kind"], i["turn"]) for i in log if i["kind"] == "user_message"] == [
        ("user_message", 1),
        ("user_message", 2),
    ]
    assert_log_consistent(log)
    third_request = fake_llm.requests[2].body["messages"]
    assert third_request[-1]["content"][0]["text"] == "B"
    assert any(
        m["role"] == "assistant" and m["content"][0].get("text") == "one" for m in third_request
    )


async def test_if_busy_reject_answers_409_while_a_turn_runs(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("slow answer"), delay=0.5)
    session_id = await new_session(agent_client)
    first = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "A"})

    rejected = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"if_busy": "reject"}, json={"text": "B"}
    )

    assert rejected.status_code == 409
    assert rejected.headers["content-type"] == "application/problem+json"
    await wait_job(agent_client, first.json()["job_id"])
    assert [i["kind"] for i in await items(agent_client, session_id)] == [
        "user_message",
        "assistant_message",
    ]


async def test_wait_that_times_out_answers_202_with_the_running_job(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("late"), delay=1.0)
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages",
        params={"wait": "true", "timeout": "0.1"},
        json={"text": "hi"},
    )

    assert reply.status_code == 202
    assert reply.json()["job"]["status"] in {"queued", "running"}
    assert (await wait_job(agent_client, reply.json()["job_id"]))["status"] == "succeeded"


async def test_message_to_unknown_session_is_404(agent_client: httpx.AsyncClient) -> None:
    response = await agent_client.post("/sessions/ses_nope/messages", json={"text": "hi"})

    assert response.status_code == 404


async def test_appending_items_while_a_turn_runs_is_409(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("slow"), delay=0.5)
    session_id = await new_session(agent_client)
    first = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "A"})

    response = await agent_client.post(
        f"/sessions/{session_id}/items", json={"kind": "system", "text": "note"}
    )

    assert response.status_code == 409
    await wait_job(agent_client, first.json()["job_id"])


async def test_a_session_offers_only_the_tools_it_names(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("add", {"a": 1, "b": 1}))
    fake_llm.reply(text("no add for me"))
    session_id = await new_session(agent_client, tools=["echo"])

    await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "add"}
    )

    assert [tool["name"] for tool in fake_llm.requests[0].body["tools"]] == ["echo"]
    result = next(i for i in await items(agent_client, session_id) if i["kind"] == "tool_result")
    assert result["is_error"] is True and "unknown tool 'add'" in result["content"]


async def test_unknown_tool_names_are_refused_with_422(agent_client: httpx.AsyncClient) -> None:
    created = await agent_client.post("/sessions", json={"tools": ["echo", "warp"]})
    session_id = await new_session(agent_client)
    patched = await agent_client.patch(f"/sessions/{session_id}", json={"tools": ["warp"]})

    assert created.status_code == 422 and "warp" in created.json()["detail"]
    assert patched.status_code == 422


async def test_chat_offers_the_builtin_session_tools_but_no_movement_or_workspace_tools(
    make_settings: object, fake_llm: FakeMessagesAPI
) -> None:
    from app.main import create_app

    settings = make_settings(anthropic_base_url=fake_llm.url, worker_poll_seconds=0.05)  # type: ignore[operator]
    app = create_app(settings)  # the builtin registry, as `strata serve` has it
    fake_llm.reply(text("hello"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session_id = await new_session(client)
            await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
            )

    offered = {tool["name"] for tool in fake_llm.requests[0].body["tools"]}
    assert offered >= {"TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "Detail", "current_time"}
    assert not offered & {"transition", "spawn_subtask", "Read", "Write", "Edit", "Bash"}


async def test_waiting_for_a_turn_the_llm_failed_answers_502_with_its_problem(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.error(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "bad"}})  # fmt: skip
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    assert reply.status_code == 502
    assert reply.json()["type"] == "urn:strata:problem:llm-request-rejected"
    assert reply.json()["job"]["status"] == "failed"
    assert reply.json()["job_id"] == reply.json()["job"]["id"]


async def test_waiting_answers_200_only_with_an_answer(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("the answer"))
    session_id = await new_session(agent_client)

    reply = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )

    assert reply.status_code == 200
    assert reply.json()["text"] == "the answer"


async def test_a_session_patched_to_no_tools_sends_its_tool_history_as_text(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """A session that used a tool and then offers none: its requests define no tools, so
    the calls and results of its history travel as text (the API refuses tool blocks in a
    request without tools, which would fail every later turn)."""
    fake_llm.reply(tool_use("add", {"a": 1, "b": 2}))
    fake_llm.reply(text("The sum is 3."))
    fake_llm.reply(text("No tools now."))
    session_id = await new_session(agent_client)
    first = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "add 1 and 2"}
    )
    patched = await agent_client.patch(f"/sessions/{session_id}", json={"tools": []})

    second = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "and now?"}
    )

    assert first.status_code == 200 and patched.status_code == 200, patched.text
    assert second.status_code == 200, second.text
    assert second.json()["text"] == "No tools now."
    assert fake_llm.unexpected == []
    sent = fake_llm.requests[-1].body
    assert "tools" not in sent
    blocks = [b for m in sent["messages"] for b in m["content"]]
    assert {b["type"] for b in blocks} == {"text"}
    history = "\n".join(b["text"] for b in blocks)
    assert "[called tool add with" in history and '"a": 1' in history
    assert "[tool result (add): 3]" in history
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    fake_llm.assert_all_consumed()
