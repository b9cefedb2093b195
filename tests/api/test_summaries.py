"""Lazy L1: turns older than the newest 20 of a chain get one-line summaries, in the
background, from the summary model; a failing model leaves the L2 text as the L1."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text
from tests.support.apps import serve
from tests.support.chat import new_session, wait_job
from tests.support.memory import (
    SUMMARY_MODEL,
    clock,
    import_session,
    jobs_of,
    many_turns,
    memory_turns,
)

START = datetime(2026, 4, 16, 13, 0, 0, tzinfo=UTC)
PAD = 30  # words of filler per text: long enough that 1/5 of it is above any minimum


@dataclass
class Chain:
    session_id: str
    times: list[str]
    job: dict[str, Any]


def _summary_of(body: dict[str, Any]) -> Step:
    """The summary model: names the turn it was asked about."""
    prompt = body["messages"][0]["content"][0]["text"]
    number = re.search(r"question (\d+)", prompt)
    return reply(text(f"Turn {number.group(1) if number else '?'} summarized."))


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, (pattern, text[:200])
    return match.group(1)


async def _import_chain(client: httpx.AsyncClient, turns: int) -> tuple[str, list[str]]:
    transcript, times = many_turns("cc-long", turns, START, pad=PAD)
    session_id = await import_session(client, "cc-long", transcript.text())
    return session_id, [clock(t) for t in times]


async def _summarize_job(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    [job] = await jobs_of(client, session_id, "summary")
    return job


@pytest.fixture
async def summarized(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> AsyncIterator[Chain]:
    """A chain of 25 turns (imported), with its summarize job run to the end."""
    for _ in range(5):
        fake_llm.respond_with(_summary_of)
    session_id, times = await _import_chain(agent_client, 25)
    job = await wait_job(agent_client, (await _summarize_job(agent_client, session_id))["id"])
    yield Chain(session_id, times, job)


async def test_every_turn_older_than_the_newest_20_gets_an_l1_from_the_summary_model(
    agent_app: FastAPI, summarized: Chain, fake_llm: FakeMessagesAPI
) -> None:
    assert summarized.job["status"] == "succeeded"
    turns = await memory_turns(agent_app, summarized.session_id)
    assert len(turns) == 25
    assert [t.l1 for t in turns[:5]] == [f"Turn {n:02d} summarized." for n in range(1, 6)]
    assert not any(t.l1_fallback for t in turns)
    assert all(t.l1 is None for t in turns[5:])
    requests = fake_llm.requests
    assert len(requests) == 5
    assert {r.body["model"] for r in requests} == {SUMMARY_MODEL}
    asked = sorted(_found(r"question (\d+)", str(r.body)) for r in requests)
    assert asked == ["01", "02", "03", "04", "05"]


async def test_the_summary_prompt_asks_for_about_a_fifth_of_the_l2_length(
    agent_app: FastAPI, summarized: Chain, fake_llm: FakeMessagesAPI
) -> None:
    turns = await memory_turns(agent_app, summarized.session_id)
    by_number = {_found(r"question (\d+)", t.user_text): t for t in turns}
    for request in fake_llm.requests:
        prompt = request.body["messages"][0]["content"][0]["text"]
        turn = by_number[_found(r"question (\d+)", prompt)]
        assert turn.user_text in prompt and turn.assistant_text in prompt
        target = int(_found(r"about (\d+) characters", prompt))
        l2_length = len(turn.user_text) + len(turn.assistant_text)
        assert abs(target - l2_length / 5) <= 10, (target, l2_length)


async def test_the_memory_block_shows_20_turns_whole_and_older_ones_as_summaries(
    agent_client: httpx.AsyncClient, summarized: Chain
) -> None:
    successor = await new_session(agent_client, continues_from=summarized.session_id)

    memory = (await agent_client.get(f"/sessions/{successor}/memory")).json()

    assert memory["counts"] == {
        "l2_turns": 20,
        "l1_turns": 5,
        "omitted_turns": 0,
        "total_turns": 25,
    }
    lines = memory["text"].splitlines()
    whole = [line for line in lines if re.match(r"\[\d\d:\d\d:\d\d\] \[user\]: ", line)]
    assert [line[:10] for line in whole] == [f"[{t}]" for t in summarized.times[5:]]
    assert whole[0].startswith(f"[{summarized.times[5]}] [user]: question 06: lorem ipsum")
    for n, time in enumerate(summarized.times[:5], start=1):
        assert f"[{time}] Turn {n:02d} summarized." in lines
        assert not any(line.startswith(f"[{time}] [") for line in lines)


async def test_a_failing_summary_model_keeps_the_l2_text_as_the_l1(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    settings = make_settings(
        anthropic_base_url=fake_llm.url,
        llm_max_retries=0,  # only Strata's own 2 retries: 3 requests for the turn
        llm_timeout_seconds=10.0,
        worker_poll_seconds=0.05,
        job_heartbeat_seconds=0.1,
    )
    for _ in range(3):
        fake_llm.error(500)
    async with serve(settings) as (app, client):
        session_id, times = await _import_chain(client, 21)
        job = await wait_job(client, (await _summarize_job(client, session_id))["id"])
        turns = await memory_turns(app, session_id)
        successor = await new_session(client, continues_from=session_id)
        block = (await client.get(f"/sessions/{successor}/memory")).json()["text"]

    assert job["status"] == "succeeded"
    assert len(fake_llm.requests) == 3
    assert {r.body["model"] for r in fake_llm.requests} == {SUMMARY_MODEL}
    oldest = turns[0]
    assert oldest.l1_fallback is True
    assert oldest.l1 is not None
    assert oldest.user_text in oldest.l1 and oldest.assistant_text in oldest.l1
    assert all(t.l1 is None for t in turns[1:])
    # shown as its summary line (cut to a line's length), not as a whole turn
    [line] = [line for line in block.splitlines() if line.startswith(f"[{times[0]}] ")]
    assert line.startswith(f"[{times[0]}] user: {oldest.user_text[:200]}")
    assert f"[{times[0]}] [user]:" not in block


async def test_summaries_never_delay_a_reply(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("Turn 01 summarized."), delay=2.5)  # a slow summary model
    session_id, _ = await _import_chain(agent_client, 21)
    summary = await _summarize_job(agent_client, session_id)
    await fake_llm.wait_for_requests(1)  # the summary is being written now
    fake_llm.reply(text("Right away."))
    # the reply's turn pushes turn 02 out of the window: the same job summarizes it next
    fake_llm.reply(text("Turn 02 summarized."))

    response = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "quick one"}
    )

    assert response.status_code == 200, response.text
    chat = response.json()["job"]
    assert chat["status"] == "succeeded"
    assert (await agent_client.get(f"/jobs/{summary['id']}")).json()["status"] == "running"
    finished = await wait_job(agent_client, summary["id"])
    assert finished["status"] == "succeeded"
    assert chat["finished_at"] < finished["finished_at"]
    assert [r.body["model"] for r in fake_llm.requests] == [
        SUMMARY_MODEL,
        "claude-sonnet-4-5",
        SUMMARY_MODEL,
    ]


async def test_a_summary_request_asks_a_small_max_tokens_and_marks_no_cache_breakpoint(
    summarized: Chain, fake_llm: FakeMessagesAPI
) -> None:
    """Each L1 request asked 8,192 tokens for a line of ~60 and put `cache_control` on a
    prompt no later request repeats: a cache write (1.25x) never read."""
    for request in fake_llm.requests:
        prompt = request.body["messages"][0]["content"][0]["text"]
        target = int(_found(r"about (\d+) characters", prompt))
        # STRATA_SUMMARY_MAX_TOKENS_PER_CHAR, 1.0: a token per character of the target
        assert 0 < request.body["max_tokens"] <= target
        assert "cache_control" not in json.dumps(request.body)
