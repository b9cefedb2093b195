"""Chat turns against the validating fake: the context check before every request,
compaction that is valid in every session, the one result budget per response, and the
reminder next to a compaction.

The fake holds every request against the window these tests give Strata (see
`make_settings`), so a request Strata should not have sent fails the test by itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from app.db.models import Session
from app.engine.compaction import SUMMARY_SYSTEM
from tests.fakes.messages_api import FakeMessagesAPI, Step, count_tokens, reply, tool_use
from tests.support.apps import serve
from tests.support.chat import assert_log_consistent, items, new_session
from tests.support.tools import agent_tools

TAG = "<system-reminder>"


def is_summary(body: dict[str, Any]) -> bool:
    return bool(body.get("system")) and SUMMARY_SYSTEM in json.dumps(body["system"])


def summaries(fake: FakeMessagesAPI) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if is_summary(r.body)]


def turns(fake: FakeMessagesAPI) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if not is_summary(r.body)]


async def say(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def say_failing(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    """A turn that cannot be made to fit: 409, the job's problem with the job beside it."""
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
    )
    assert response.status_code == 409, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return dict(response.json())


async def test_a_text_only_chat_compacts_before_a_request_would_pass_the_force_threshold(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """A chat of text answers compacts too, not only after a response that called a tool:
    otherwise it grows past its window ("prompt is too long")."""
    window = 1_600

    def answer(body: dict[str, Any]) -> Step:
        if is_summary(body):
            return reply("SUMMARY of the talk so far.")
        return reply("A long answer. " * 70)  # ~1,050 characters, ~260 tokens

    fake_llm.always(answer)
    settings = make_settings(anthropic_base_url=fake_llm.url, context_window_tokens=window)
    async with serve(settings, tools=agent_tools()) as (_, client):
        session_id = await new_session(client)
        for n in range(8):
            assert (await say(client, session_id, f"question {n}"))["job"]["status"] == "succeeded"
        session = (await client.get(f"/sessions/{session_id}")).json()
        log = await items(client, session_id)

    assert session["segment"] >= 1  # compacted, and never after a tool call
    assert summaries(fake_llm)
    for body in fake_llm.requests:
        assert count_tokens(body.body) < 0.99 * window
    assert_log_consistent(log)


async def test_a_request_that_nothing_can_make_fit_fails_the_turn_context_exhausted(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """A system prompt larger than the window: compaction cannot shrink it, so the turn
    fails with `context-exhausted` after one summary, and the request is never sent."""
    fake_llm.reply("SUMMARY")
    fake_llm.reply("SUMMARY")  # the next turn tries once too
    settings = make_settings(anthropic_base_url=fake_llm.url, context_window_tokens=1_600)
    async with serve(settings, tools=agent_tools()) as (_, client):
        session_id = await new_session(client, system_prompt="Rules. " * 1_000)
        response = await say_failing(client, session_id, "hello")
        again = await say_failing(client, session_id, "hello again")

    assert response["type"] == "urn:strata:problem:context-exhausted"
    job = response["job"]
    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:strata:problem:context-exhausted"
    assert "1600 tokens" in job["error"]["detail"] and "99%" in job["error"]["detail"]
    assert len(summaries(fake_llm)) == 2 and turns(fake_llm) == []
    assert again["job"]["error"]["type"] == "urn:strata:problem:context-exhausted"


async def test_compaction_in_a_session_without_tools_opens_without_a_tool_call(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """Where the session's requests define no tools, the new segment opens without a
    `TaskList` call: a request with tool blocks and no tools is refused."""
    session_id = await new_session(agent_client, tools=[])
    await agent_client.post(f"/sessions/{session_id}/tasks", json={"subject": "keep me"})
    fake_llm.reply("Noted.")
    await say(agent_client, session_id, "hello")
    fake_llm.reply("SUMMARY")
    compacted = await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})
    fake_llm.reply("Still here.")

    assert (await say(agent_client, session_id, "next"))["text"] == "Still here."

    assert compacted.json()["status"] == "succeeded"
    after = fake_llm.requests[-1].body
    assert "tools" not in after
    kinds = {b["type"] for m in after["messages"] for b in m["content"]}
    assert kinds == {"text"}
    assert "keep me" in json.dumps(after["messages"][0])  # the snapshot, as a system note


async def test_compaction_with_an_empty_task_list_adds_no_task_list_call(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    fake_llm.reply("Noted.")
    await say(agent_client, session_id, "hello")
    fake_llm.reply("SUMMARY")
    await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    log = await items(agent_client, session_id)

    opening = [i["kind"] for i in log if i["segment"] == 1]
    assert opening == ["compact_summary", "system"]
    assert "The task list is empty." in log[-1]["text"]


async def test_a_reminder_due_right_after_a_compaction_is_not_a_third_copy_of_the_list(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Snapshot, `TaskList` result and reminder would be three copies of the list in one
    request: the reminder is skipped there, and counts as shown."""
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        reminder_requests_since_task_write=0,
        reminder_requests_between_reminders=1,
    )
    fake_llm.reply(tool_use("echo", {"text": "x"}), usage={"input_tokens": 192_000})
    fake_llm.reply("SUMMARY")
    fake_llm.reply("Done.")
    async with serve(settings, tools=agent_tools()) as (app, client):
        session_id = await new_session(client)
        await client.post(f"/sessions/{session_id}/tasks", json={"subject": "the parser"})
        assert (await say(client, session_id, "go"))["text"] == "Done."
        async with app.state.database.read() as db:
            row = await db.get(Session, session_id)
            assert row is not None
            counters = (row.llm_requests, row.last_reminder_request)

    first, after = turns(fake_llm)
    assert TAG in json.dumps(first)  # due at once (N = 0), before the compaction
    text = json.dumps(after)
    assert TAG not in text
    assert text.count("the parser") == 2  # the snapshot and the TaskList result
    assert counters == (2, 2)


async def test_the_tool_calls_of_one_response_share_one_result_budget_in_chat(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """In chat too, four parallel calls share one result budget, not each the whole."""
    window = 8_000
    big = {"text": "y", "times": 20_000}  # 5,000 tokens each
    fake_llm.reply(*(tool_use("repeat", big) for _ in range(4)))
    fake_llm.reply("Read them.")
    settings = make_settings(
        anthropic_base_url=fake_llm.url, context_window_tokens=window, tool_result_min_tokens=100
    )
    async with serve(settings, tools=agent_tools()) as (_app, client):
        session_id = await new_session(client)
        answer = await say(client, session_id, "repeat four times")

    assert answer["text"] == "Read them."
    results = [
        b for b in fake_llm.requests[1].messages[-1]["content"] if b["type"] == "tool_result"
    ]
    assert len(results) == 4
    total = sum(len(r["content"]) for r in results)
    before = count_tokens(fake_llm.requests[0].body)
    assert total <= (window - before) // 2 * 4  # half of what was left, all four together
    for result in results:
        assert "[Output truncated" in result["content"]
        assert "smaller part" in result["content"]


async def test_a_prompt_the_api_counts_longer_than_estimated_is_compacted_not_repeated(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """A tokenizer denser than the 4-characters estimate ("prompt is too long" from the
    API): the refusal's count becomes the measure, the chat compacts and answers, and the
    session stays usable instead of failing the same way on every later request (a turn
    goes past at most one refusal for its size)."""
    settings = make_settings(anthropic_base_url=fake_llm.url, context_window_tokens=4_000)
    fake_llm.reply("Parsers: " + "tokens become trees. " * 300)  # ~6,300 characters
    fake_llm.reply("SUMMARY: a long answer about parsers.")
    fake_llm.reply("Answered.")
    fake_llm.reply("Still here.")
    async with serve(settings, tools=agent_tools()) as (_, client):
        session_id = await new_session(client)
        await say(client, session_id, "Explain parsers.")
        fake_llm.chars_per_token = 2  # the API counts twice the tokens Strata estimates
        first = await say(client, session_id, "and lexers?")
        second = await say(client, session_id, "and grammars?")

    assert (first["text"], second["text"]) == ("Answered.", "Still here.")
    refusals = [u.reason for u in fake_llm.unexpected]
    assert refusals[0].startswith("prompt is too long: 4")
    # a new turn estimates afresh: at most one more refusal, for its size, then it fits
    assert len(refusals) <= 2
    assert all(" exceed context limit: " in r for r in refusals[1:])
    assert len(summaries(fake_llm)) == 1
    answered = [r for r in fake_llm.requests if r not in [u.request for u in fake_llm.unexpected]]
    assert all(count_tokens(r.body, chars_per_token=2) < 4_000 for r in answered)
    fake_llm.reset()  # the refusals were the point


async def test_a_window_set_above_the_apis_is_learnt_from_its_refusal_and_the_chat_compacts(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """STRATA_CONTEXT_WINDOW_TOKENS above the API's window: after "prompt is too long: N
    tokens > M maximum" the request is under 50% of the configured window, and sent
    unchanged again it would fail the turn. M becomes the window: the chat compacts (its
    summary held to M too), answers, and later turns are held to M without a refusal."""
    settings = make_settings(
        anthropic_base_url=fake_llm.url, context_window_tokens=40_000, llm_max_tokens=1_024
    )
    fake_llm.context_window_tokens = 4_000  # after make_settings, which matches it to Strata's
    fake_llm.reply("Parsers: " + "tokens become trees. " * 850)  # ~4,500 tokens
    fake_llm.reply("SUMMARY: a long answer about parsers.")
    fake_llm.reply("Answered.")
    fake_llm.reply("Still here.")
    async with serve(settings, tools=agent_tools()) as (_, client):
        session_id = await new_session(client)
        await say(client, session_id, "Explain parsers.")
        first = await say(client, session_id, "and lexers?")
        second = await say(client, session_id, "and grammars?")

    assert (first["text"], second["text"]) == ("Answered.", "Still here.")
    [refusal] = [u.reason for u in fake_llm.unexpected]
    assert re.fullmatch(r"prompt is too long: \d+ tokens > 4000 maximum", refusal)
    assert len(summaries(fake_llm)) == 1
    fake_llm.reset()  # the refusal was the point
