"""Layered memory through the API: turn projection, detail look-ups by time, the Detail tool,
and merging sessions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.db.repositories.memory import MemoryRepository
from app.services.memory import project_turns
from app.settings import Settings
from app.tools.detail import detail_tool
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import items, new_session
from tests.support.memory import (
    Transcript,
    clock,
    database_of,
    import_session,
    memory_rows,
    memory_turns,
)
from tests.support.tools import agent_tools

THINKING = "SECRET-REASONING: the user probably wants the green build"
NOISY_OUTPUT = (
    "\x1b[32mcompiled ok\x1b[0m\n"
    "\n   \n"
    "████████░░░░ 45%\n"
    "Downloading... 10%\rDownloading... 60%\rDownloading... 100%\n"
    "\x1b[1;31mall 3 files written\x1b[0m"
)


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _thinking_then_tool_call(tool_id: str, tool_input: dict[str, Any]) -> str:
    """A streamed reply with a thinking block, a text block and a tool call (the fake's
    `reply()` has no thinking blocks, so this is the raw SSE the real API sends)."""
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        (
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": THINKING},
                {"type": "signature_delta", "signature": "c2lnbmF0dXJl"},
            ],
        ),
        ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Let me build it."}]),
        (
            {"type": "tool_use", "id": tool_id, "name": "echo", "input": {}},
            [{"type": "input_json_delta", "partial_json": json.dumps(tool_input)}],
        ),
    ]
    message: dict[str, Any] = {
        "id": "msg_thinking_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events = [_sse("message_start", {"type": "message_start", "message": message})]
    for index, (start, deltas) in enumerate(blocks):
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 30},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return "".join(events)


async def _tool_turn(client: httpx.AsyncClient, fake: FakeMessagesAPI) -> tuple[str, str, str]:
    """One real turn: thinking, text and an echo call with a noisy output, then the answer.
    Returns (session id, the turn's HH:MM:SS, the tool_use id)."""
    tool_id = "toolu_projection_1"
    fake.raw_sse(_thinking_then_tool_call(tool_id, {"text": NOISY_OUTPUT}))
    fake.reply(text("The build is green."))
    session_id = await new_session(client)
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "build it"}
    )
    assert response.status_code == 200, response.text
    log = await items(client, session_id)
    answer = [i for i in log if i["kind"] == "assistant_message"][-1]
    return session_id, clock(answer["created_at"]), tool_id


async def _detail(client: httpx.AsyncClient, session_id: str, time: str) -> httpx.Response:
    return await client.get(f"/sessions/{session_id}/detail/{time}")


# --- turn projection through real turns ----------------------------------------------------


async def test_a_turn_is_projected_into_l2_and_l3_grouped_by_kind_with_source_ids(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, time, tool_id = await _tool_turn(agent_client, fake_llm)

    response = await _detail(agent_client, session_id, time)

    assert response.status_code == 200, response.text
    [turn] = response.json()["data"]
    assert (turn["session_id"], turn["turn"], turn["time"]) == (session_id, 1, time)
    assert turn["user_text"] == "build it"
    assert turn["assistant_text"] == "Let me build it.\n\nThe build is green."
    assert set(turn["details"]) == {"tool_input", "tool_output"}
    [tool_input] = turn["details"]["tool_input"]
    assert (tool_input["source_id"], tool_input["tool_name"]) == (tool_id, "echo")
    assert json.loads(tool_input["text"]) == {"text": NOISY_OUTPUT}
    [tool_output] = turn["details"]["tool_output"]
    assert tool_output["source_id"] == f"{tool_id}:result"


async def test_a_turn_whose_llm_call_failed_is_still_remembered(
    agent_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    """The runner ends it (`Handler.failed`), not the turn: its memory is written all the
    same, from the session's row read in the job's end."""
    fake_llm.error(400)  # refused for good: no retry
    async with serve(agent_settings) as (app, client):
        session_id = await new_session(client)
        response = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "why?"}
        )
        turns = await memory_turns(app, session_id)

    assert response.json()["job"]["status"] == "failed", response.text
    assert [(t.turn, t.user_text) for t in turns] == [(1, "why?")]


async def test_thinking_of_a_turn_is_never_stored(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, time, _ = await _tool_turn(agent_client, fake_llm)

    log = await items(agent_client, session_id)
    assert THINKING in json.dumps(log)  # the log keeps it; memory must not
    detail = await _detail(agent_client, session_id, time)
    assert "SECRET-REASONING" not in detail.text
    turns, details = await memory_rows(agent_app)
    assert turns and details
    assert not any("SECRET-REASONING" in str(row) for row in [*turns, *details])


async def test_progress_and_ansi_noise_of_a_tool_output_does_not_reach_l3(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, time, _ = await _tool_turn(agent_client, fake_llm)

    turn = (await _detail(agent_client, session_id, time)).json()["data"][0]

    assert turn["details"]["tool_output"][0]["text"] == "compiled ok\nall 3 files written"


async def test_projecting_a_turn_again_changes_nothing(
    agent_app: FastAPI, agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, _, _ = await _tool_turn(agent_client, fake_llm)
    before = await memory_rows(agent_app)
    assert before[0] and before[1]

    changed = await database_of(agent_app).write(lambda db: project_turns(db, session_id, [1]))

    assert changed == 0
    assert await memory_rows(agent_app) == before


# --- detail look-ups by time ----------------------------------------------------------------

DAY1 = datetime(2026, 3, 1, 9, 15, 30, tzinfo=UTC)


@pytest.fixture
async def three_days(client: httpx.AsyncClient) -> AsyncIterator[str]:
    """A session with a turn at 09:15:30 on three days, and one at 10:00:00 on day 2."""
    transcript = Transcript("cc-days")
    for day in range(3):
        transcript.turn(
            DAY1 + timedelta(days=day),
            f"day {day + 1} question",
            f"day {day + 1} answer",
            tool=("Bash", {"command": f"date # {day + 1}"}, f"day {day + 1} output"),
        )
        if day == 1:
            transcript.turn(datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC), "ten", "o'clock")
    yield await import_session(client, "cc-days", transcript.text())


def _days(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [t["ended_at"][:10] for t in response.json()["data"]]


async def test_a_time_of_day_matches_every_day_newest_first(
    client: httpx.AsyncClient, three_days: str
) -> None:
    response = await _detail(client, three_days, "09:15:30")

    assert _days(response) == ["2026-03-03", "2026-03-02", "2026-03-01"]
    newest = response.json()["data"][0]
    assert (newest["user_text"], newest["assistant_text"]) == ("day 3 question", "day 3 answer")
    assert newest["details"]["tool_input"][0]["text"] == '{"command":"date # 3"}'
    assert newest["details"]["tool_output"][0]["text"] == "day 3 output"
    assert newest["time"] == "09:15:30"


async def test_hh_mm_matches_the_whole_minute(client: httpx.AsyncClient, three_days: str) -> None:
    assert _days(await _detail(client, three_days, "09:15")) == [
        "2026-03-03",
        "2026-03-02",
        "2026-03-01",
    ]
    assert (await _detail(client, three_days, "09:16")).status_code == 404


async def test_ranges_match_every_turn_inside_them(
    client: httpx.AsyncClient, three_days: str
) -> None:
    assert len(_days(await _detail(client, three_days, "09:15:30-09:15:30"))) == 3
    assert len(_days(await _detail(client, three_days, "09:00-10:00"))) == 4
    only_ten = (await _detail(client, three_days, "09:15:31-10:00:00")).json()["data"]
    assert [t["user_text"] for t in only_ten] == ["ten"]


async def test_an_iso_timestamp_names_one_moment(
    client: httpx.AsyncClient, three_days: str
) -> None:
    assert _days(await _detail(client, three_days, "2026-03-02T09:15:30Z")) == ["2026-03-02"]
    assert _days(await _detail(client, three_days, "2026-03-02T10:00:00+00:00")) == ["2026-03-02"]
    assert (await _detail(client, three_days, "2026-03-04T09:15:30Z")).status_code == 404


async def test_no_matching_turn_is_404(client: httpx.AsyncClient, three_days: str) -> None:
    response = await _detail(client, three_days, "11:11:11")

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_a_malformed_time_is_422(client: httpx.AsyncClient, three_days: str) -> None:
    for time in ("25:00", "abc", "12:60", "09:15:61", "9-10", "2026-13-01T00:00:00Z"):
        response = await _detail(client, three_days, time)

        assert response.status_code == 422, (time, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["status"] == 422


async def test_detail_is_searched_across_the_chain(
    client: httpx.AsyncClient, three_days: str
) -> None:
    successor = await new_session(client, continues_from=three_days)

    response = await _detail(client, successor, "09:15:30")

    assert _days(response) == ["2026-03-03", "2026-03-02", "2026-03-01"]
    assert {t["session_id"] for t in response.json()["data"]} == {three_days}


# --- the Detail tool ------------------------------------------------------------------------


@pytest.fixture
async def detail_client(agent_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    tools = agent_tools()
    tools.register(detail_tool())
    async with serve(agent_settings, tools=tools) as (_, client):
        yield client


async def test_the_detail_tool_gives_the_model_the_turns_l2_and_l3(
    detail_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("echo", {"text": "port=8000"}))
    fake_llm.reply(text("The port is 8000."))
    first = await new_session(detail_client)
    await detail_client.post(
        f"/sessions/{first}/messages", params={"wait": "true"}, json={"text": "which port?"}
    )
    answer = [i for i in await items(detail_client, first) if i["kind"] == "assistant_message"]
    time = clock(answer[-1]["created_at"])
    second = await new_session(detail_client, continues_from=first)
    call = tool_use("Detail", {"time": time})
    fake_llm.reply(call)
    fake_llm.reply(text("It was 8000."))

    response = await detail_client.post(
        f"/sessions/{second}/messages", params={"wait": "true"}, json={"text": "what port?"}
    )

    assert response.status_code == 200, response.text
    [result] = [i for i in await items(detail_client, second) if i["kind"] == "tool_result"]
    assert result["tool_use_id"] == call.id
    assert result["is_error"] is False
    content = result["content"]
    assert f"[{time}]" in content and f"session {first}" in content
    assert "[user]: which port?" in content
    assert "[assistant]: The port is 8000." in content
    assert "### tool_input" in content and '{"text":"port=8000"}' in content
    assert "### tool_output" in content and "port=8000" in content.split("### tool_output")[1]
    sent = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result" and "[user]: which port?" in json.dumps(sent)


async def test_the_detail_tool_reports_a_bad_time_to_the_model(
    detail_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("Detail", {"time": "25:00"}))
    fake_llm.reply(text("That time does not exist."))
    session_id = await new_session(detail_client)

    await detail_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "look"}
    )

    [result] = [i for i in await items(detail_client, session_id) if i["kind"] == "tool_result"]
    assert result["is_error"] is True
    assert "25:00" in result["content"]


# --- merge ----------------------------------------------------------------------------------

A_TIME = datetime(2026, 3, 5, 8, 0, 0, tzinfo=UTC)
B_TIME = datetime(2026, 3, 5, 9, 0, 0, tzinfo=UTC)


@pytest.fixture
async def two_sessions(client: httpx.AsyncClient) -> AsyncIterator[tuple[str, str]]:
    """Two sessions with a turn each (A at 08:00:00, B at 09:00:00)."""
    a = Transcript("cc-a")
    a.turn(A_TIME, "a question", "a answer", tool=("Read", {"file": "a.txt"}, "a contents"))
    b = Transcript("cc-b")
    b.turn(B_TIME, "b question", "b answer")
    yield (
        await import_session(client, "cc-a", a.text(), cwd="/a"),
        await import_session(client, "cc-b", b.text(), cwd="/b"),
    )


async def test_merge_moves_the_turns_into_the_target(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, b = two_sessions

    response = await client.post(f"/sessions/{a}/merge", json={"into": b})

    assert response.status_code == 200, response.text
    assert response.json()["id"] == b
    found = (await _detail(client, b, "08:00:00")).json()["data"]
    assert [(t["session_id"], t["user_text"]) for t in found] == [(a, "a question")]
    assert found[0]["details"]["tool_output"][0]["text"] == "a contents"
    assert (await client.get(f"/sessions/{a}")).json()["merged_into"] == b


async def test_a_merge_into_something_that_is_no_session_id_is_refused_naming_into(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, _ = two_sessions

    response = await client.post(f"/sessions/{a}/merge", json={"into": "I+h ¹"})

    assert response.status_code == 422, response.text
    assert "into" in response.text
    assert (await client.get(f"/sessions/{a}")).json()["merged_into"] is None


async def test_a_merged_session_answers_its_reads_through_the_target(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, b = two_sessions
    await client.post(f"/sessions/{a}/merge", json={"into": b})

    memory = (await client.get(f"/sessions/{a}/memory")).json()
    via_a = await _detail(client, a, "09:00:00")
    own = await _detail(client, a, "08:00:00")

    assert memory["session_id"] == b
    assert via_a.status_code == 200 and via_a.json()["data"][0]["session_id"] == b
    assert own.json() == (await _detail(client, b, "08:00:00")).json()


async def test_a_continuation_of_a_merged_session_keeps_its_memory(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, b = two_sessions
    successor = await new_session(client, continues_from=a)
    before = (await client.get(f"/sessions/{successor}/memory")).json()
    assert "[08:00:00] [user]: a question" in before["text"]

    await client.post(f"/sessions/{a}/merge", json={"into": b})

    after = (await client.get(f"/sessions/{successor}/memory")).json()
    assert "[08:00:00] [user]: a question" in after["text"]
    assert (await _detail(client, successor, "08:00:00")).status_code == 200


async def test_merge_into_itself_is_422(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, _ = two_sessions

    response = await client.post(f"/sessions/{a}/merge", json={"into": a})

    assert response.status_code == 422
    assert (await client.get(f"/sessions/{a}")).json()["merged_into"] is None


async def test_merge_into_an_unknown_session_is_404(
    client: httpx.AsyncClient, two_sessions: tuple[str, str]
) -> None:
    a, _ = two_sessions

    response = await client.post(
        f"/sessions/{a}/merge", json={"into": "ses_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"}
    )

    assert response.status_code == 404
    assert (await client.get(f"/sessions/{a}")).json()["merged_into"] is None


async def test_a_merge_failing_half_way_leaves_both_sessions_unchanged(
    app: FastAPI,
    client: httpx.AsyncClient,
    two_sessions: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = two_sessions
    sessions_before = [(await client.get(f"/sessions/{s}")).json() for s in (a, b)]
    rows_before = await memory_rows(app)
    real_move = MemoryRepository.move_turns
    moved: list[int] = []

    async def move_then_fail(self: MemoryRepository, source: str, target: str, limit: int) -> int:
        moved.append(await real_move(self, source, target, limit))
        await self.db.flush()
        raise RuntimeError("the disk filled up half-way through the merge")

    monkeypatch.setattr(MemoryRepository, "move_turns", move_then_fail)

    response = await client.post(f"/sessions/{a}/merge", json={"into": b})

    assert moved == [1]  # the move itself happened before the failure
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    assert [(await client.get(f"/sessions/{s}")).json() for s in (a, b)] == sessions_before
    assert await memory_rows(app) == rows_before
    assert (await _detail(client, b, "08:00:00")).status_code == 404
