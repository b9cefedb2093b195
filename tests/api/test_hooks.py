"""POST /hooks/claude-code: Claude Code as a client, with real transcripts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.apps import serve
from tests.support.chat import items
from tests.support.memory import (
    Transcript,
    clock,
    hook_payload,
    import_session,
    memory_rows,
    memory_turns,
    post_hook,
    real_transcript,
    row_counts,
    sessions_with_parent,
    stop,
)

MAIN = "fasthooks__sample_main_transcript.jsonl"
SIDECHAIN = "fasthooks__sample_agent_sidechain.jsonl"
WITH_HEADER = "session-share__images-in-user-messages.jsonl"
T0 = datetime(2026, 4, 16, 14, 23, 5, tzinfo=UTC)


def _thinking_texts(transcript: str) -> list[str]:
    found = []
    for line in transcript.splitlines():
        message = json.loads(line).get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            found += [b["thinking"] for b in message["content"] if b.get("type") == "thinking"]
    return found


def _split_before_a_user_line(transcript: str) -> tuple[str, str, int]:
    """Two chunks split at a line boundary where a user entry starts (never inside the
    lines of one API message); and the line number the second chunk starts at."""
    lines = transcript.splitlines(keepends=True)
    middle = len(lines) // 2
    cut = next(i for i in range(middle, len(lines)) if json.loads(lines[i])["type"] == "user")
    return "".join(lines[:cut]), "".join(lines[cut:]), cut + 1


async def _log_view(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    """The log without what differs between two sessions (ids, per-session times)."""
    return [
        {k: v for k, v in item.items() if k not in ("session_id",)}
        for item in await items(client, session_id)
    ]


async def _memory_view(app: FastAPI, session_id: str) -> list[tuple[Any, ...]]:
    return [
        (t.turn, t.ended_at, t.user_text, t.assistant_text)
        for t in await memory_turns(app, session_id)
    ]


# --- Stop: importing transcripts -----------------------------------------------------------


async def test_stop_with_a_whole_real_transcript_imports_items_and_memory(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    response = await stop(client, "cc-main", real_transcript(MAIN))

    session_id = response.headers["Strata-Session"]
    assert response.headers["Strata-Imported"] == "46"  # its local-command caveat is no item
    assert response.json() == {}
    log = await items(client, session_id)
    assert len(log) == 46
    assert {i["origin"] for i in log} == {"import"}
    session = (await client.get(f"/sessions/{session_id}")).json()
    assert (session["source"], session["external_id"], session["project"]) == (
        "claude-code",
        "cc-main",
        "/work/project",
    )
    turns = await memory_turns(app, session_id)
    assert turns
    assert turns[0].user_text == "can you run a command ls -la"
    assert turns[0].assistant_text.startswith("Done! Here's the output of `ls -la`")


async def test_thinking_of_an_imported_transcript_is_stored_in_no_layer(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = real_transcript(MAIN)
    thinking = _thinking_texts(transcript)
    assert len(thinking) >= 5

    await stop(client, "cc-main", transcript)

    turns, details = await memory_rows(app)
    stored = [t[5] + t[6] for t in turns] + [d[5] for d in details]
    assert stored
    for text in thinking:
        fragment = text[:60]
        assert not any(fragment in s for s in stored), fragment


async def test_posting_the_same_transcript_again_imports_nothing(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = real_transcript(MAIN)
    await stop(client, "cc-main", transcript)
    counts = await row_counts(app)
    rows = await memory_rows(app)

    again = await stop(client, "cc-main", transcript)

    assert again.headers["Strata-Imported"] == "0"
    assert again.headers["Strata-Already-Known"] == "46"
    assert await row_counts(app) == counts
    assert await memory_rows(app) == rows


async def test_a_transcript_posted_in_two_chunks_equals_posting_it_whole(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = real_transcript(MAIN)
    first, second, second_line = _split_before_a_user_line(transcript)
    whole = await import_session(client, "cc-whole", transcript)

    # another project: in the same one it would continue cc-whole's chain, which holds
    # its system texts already (kept once per chain)
    elsewhere = "/work/elsewhere"
    one = await stop(client, "cc-chunked", first, cwd=elsewhere)
    two = await stop(client, "cc-chunked", second, cwd=elsewhere, transcript_first_line=second_line)

    chunked = one.headers["Strata-Session"]
    assert int(one.headers["Strata-Imported"]) + int(two.headers["Strata-Imported"]) == 46
    assert await _log_view(client, chunked) == await _log_view(client, whole)
    assert await _memory_view(app, chunked) == await _memory_view(app, whole)
    _, details = await memory_rows(app)
    by_session: dict[str, list[tuple[Any, ...]]] = {}
    for d in details:
        by_session.setdefault(d[2], []).append((d[3], d[4], d[5]))
    assert sorted(by_session[chunked]) == sorted(by_session[whole])


async def test_a_transcript_whose_tool_call_id_the_api_refuses_still_makes_valid_requests(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    """A call and its result posted by two Stop hooks, their id holding a quote: a chat turn
    on the mirrored session sends them back in a request the Messages API accepts."""
    bad = 'toolu_1"><b id="injected">'
    transcript = Transcript("cc-bad-id")
    transcript.user(T0, "list the files")
    transcript.assistant(
        T0 + timedelta(seconds=1),
        {"type": "tool_use", "id": bad, "name": "Bash", "input": {"command": "ls"}},
    )
    first = transcript.text()
    transcript.user(
        T0 + timedelta(seconds=2), [{"type": "tool_result", "tool_use_id": bad, "content": "a"}]
    )
    transcript.assistant(T0 + timedelta(seconds=3), {"type": "text", "text": "One file."})
    session_id = await import_session(agent_client, "cc-bad-id", first)
    rest = transcript.text().removeprefix(first)
    await stop(agent_client, "cc-bad-id", rest, transcript_first_line=3)
    fake_llm.reply("Still one file.")

    answered = await agent_client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "and now?"}
    )

    assert answered.status_code == 200, answered.text
    [sent] = fake_llm.requests
    [call] = [b for m in sent.body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    [result] = [
        b for m in sent.body["messages"] for b in m["content"] if b["type"] == "tool_result"
    ]
    assert call["id"] == result["tool_use_id"] != bad
    assert fake_llm.unexpected == []


async def test_malformed_lines_are_reported_and_the_rest_imported(
    client: httpx.AsyncClient,
) -> None:
    transcript = real_transcript(WITH_HEADER)  # starts with two `//` comment lines
    assert transcript.startswith("//")
    total = len(transcript.splitlines())
    broken = transcript + '{"type": "user", "message": {"role": "us\n' + "[1,2]\n"

    response = await stop(client, "cc-broken", broken)

    message = response.json()["systemMessage"]
    assert message.startswith("Strata skipped 4 transcript lines")
    for line in (1, 2, total + 1, total + 2):
        assert f"line {line}:" in message
    assert "not JSON" in message and "not a JSON object: array" in message
    clean = await stop(client, "cc-clean", "\n".join(transcript.splitlines()[2:]) + "\n")
    assert response.headers["Strata-Imported"] == clean.headers["Strata-Imported"]
    assert int(response.headers["Strata-Imported"]) == 22  # 4 IDE notes are items apart


async def test_sidechain_entries_go_to_a_child_session(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = real_transcript(MAIN) + real_transcript(SIDECHAIN)

    response = await stop(client, "c45af7b1", transcript)

    main_id = response.headers["Strata-Session"]
    assert response.headers["Strata-Imported"] == "48"
    main_log = await items(client, main_id)
    assert len(main_log) == 46
    assert not any("Warmup" in json.dumps(i) for i in main_log)
    children = await sessions_with_parent(app, main_id)
    assert len(children) == 1
    child_log = await items(client, children[0].id)
    assert [i["kind"] for i in child_log] == ["user_message", "assistant_message"]
    assert child_log[0]["content"][0]["text"] == "Warmup"
    assert children[0].external_id == "c45af7b1/af1ff21"


async def test_unknown_record_types_are_ignored(client: httpx.AsyncClient) -> None:
    transcript = Transcript("cc-unknown")
    transcript.turn(T0, "hello", "hi there")
    at = T0.isoformat()
    transcript.add({"type": "progress", "timestamp": at, "data": {"percent": 50}})
    transcript.add({"type": "some-future-record", "timestamp": at, "uuid": "x-1", "v": [1]})
    transcript.add({"type": "queue-operation", "operation": "enqueue", "timestamp": at})
    transcript.add({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})

    response = await stop(client, "cc-unknown", transcript.text())

    assert response.json() == {}  # nothing reported
    assert response.headers["Strata-Imported"] == "2"
    log = await items(client, response.headers["Strata-Session"])
    assert [i["kind"] for i in log] == ["user_message", "assistant_message"]


async def test_a_one_megabyte_line_is_imported(client: httpx.AsyncClient) -> None:
    big = "x" * (1024 * 1024)
    transcript = Transcript("cc-big")
    transcript.turn(T0, "paste: " + big, "That is a lot of x.")
    assert max(len(line) for line in transcript.lines) > 1024 * 1024

    response = await stop(client, "cc-big", transcript.text())

    assert response.headers["Strata-Imported"] == "2"
    log = await items(client, response.headers["Strata-Session"])
    assert log[0]["content"][0]["text"] == "paste: " + big


async def test_the_hook_endpoint_has_its_own_body_limit(client: httpx.AsyncClient) -> None:
    transcript = Transcript("cc-2mb")
    transcript.turn(T0, "y" * (2 * 1024 * 1024), "ok")
    payload = hook_payload("stop", session_id="cc-2mb", transcript=transcript.text())

    hook = await post_hook(client, payload)
    other = await client.post("/sessions", json={"title": "t", "metadata": {"x": "y" * 2**21}})

    assert hook.status_code == 200, hook.text
    assert other.status_code == 413
    assert other.json()["limit"] == 1024 * 1024


async def test_the_hook_body_limit_is_a_setting_of_its_own(make_settings: Any) -> None:
    settings = make_settings(hook_max_body_bytes=512 * 1024, max_body_bytes=4 * 1024 * 1024)
    async with serve(settings) as (_, client):
        transcript = Transcript("cc-limit")
        transcript.turn(T0, "z" * (1024 * 1024), "ok")
        payload = hook_payload("stop", session_id="cc-limit", transcript=transcript.text())

        hook = await post_hook(client, payload)
        other = await client.post("/sessions", json={"metadata": {"x": "z" * 2**20}})

    assert hook.status_code == 413
    assert hook.json()["limit"] == 512 * 1024
    assert other.status_code == 201


async def test_stop_without_lines_is_refused_unless_reading_transcript_path_is_allowed(
    make_settings: Any, tmp_path: Path
) -> None:
    path = tmp_path / "session.jsonl"
    transcript = Transcript("cc-path")
    transcript.turn(T0, "read me from disk", "read")
    path.write_text(transcript.text())
    payload = hook_payload("stop", session_id="cc-path", transcript_path=str(path))

    async with serve(make_settings()) as (_, client):
        refused = await post_hook(client, payload)
    allowed = make_settings(hook_read_transcript_path=True, hook_transcript_roots=str(tmp_path))
    async with serve(allowed) as (_, client):
        taken = await post_hook(client, payload)

    assert refused.status_code == 422
    assert taken.status_code == 200, taken.text
    assert taken.headers["Strata-Imported"] == "2"


# --- SessionStart and other events ---------------------------------------------------------


@pytest.fixture
async def earlier_session(client: httpx.AsyncClient) -> AsyncIterator[tuple[str, str]]:
    """A Claude Code session of /work/project with two turns; (session id, a turn's time)."""
    transcript = Transcript("cc-earlier")
    transcript.turn(T0, "Which port does the API use?", "Port 8000.")
    ended = transcript.turn(T0 + timedelta(minutes=2), "Make it 9000.", "Changed it to 9000.")
    yield await import_session(client, "cc-earlier", transcript.text()), clock(ended)


async def test_session_start_links_a_new_session_to_the_latest_of_its_project(
    client: httpx.AsyncClient, earlier_session: tuple[str, str]
) -> None:
    earlier, time = earlier_session
    payload = hook_payload("session_start_startup", session_id="cc-next", cwd="/work/project")

    response = await post_hook(client, payload)

    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"hookSpecificOutput"}
    output = answer["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    context = output["additionalContext"]
    assert f"[{time}] [user]: Make it 9000." in context
    assert f"[{time}] [assistant]: Changed it to 9000." in context
    assert f"[{clock(T0)}] [user]: Which port does the API use?" in context
    new_id = response.headers["Strata-Session"]
    assert new_id != earlier
    assert (await client.get(f"/sessions/{new_id}")).json()["continues_from"] == earlier


async def test_session_start_in_another_project_is_not_linked(
    client: httpx.AsyncClient, earlier_session: tuple[str, str]
) -> None:
    payload = hook_payload("session_start_startup", session_id="cc-other", cwd="/elsewhere")

    response = await post_hook(client, payload)

    assert response.json()["hookSpecificOutput"]["additionalContext"] == ""
    session = (await client.get(f"/sessions/{response.headers['Strata-Session']}")).json()
    assert session["continues_from"] is None


async def test_session_start_resume_keeps_the_same_session(
    client: httpx.AsyncClient, earlier_session: tuple[str, str]
) -> None:
    earlier, _ = earlier_session
    payload = hook_payload("session_start_resume", session_id="cc-earlier", cwd="/work/project")

    response = await post_hook(client, payload)

    assert response.status_code == 200
    assert response.headers["Strata-Session"] == earlier
    assert (await client.get(f"/sessions/{earlier}")).json()["continues_from"] is None
    # the session's own turns are never its memory
    assert response.json()["hookSpecificOutput"]["additionalContext"] == ""


async def test_session_start_links_to_the_main_session_not_a_subagent_thread(
    client: httpx.AsyncClient,
) -> None:
    transcript = real_transcript(MAIN) + real_transcript(SIDECHAIN)
    main = await import_session(client, "c45af7b1", transcript, cwd="/workspace")
    payload = hook_payload("session_start_startup", session_id="cc-after", cwd="/workspace")

    response = await post_hook(client, payload)

    new_id = response.headers["Strata-Session"]
    assert (await client.get(f"/sessions/{new_id}")).json()["continues_from"] == main
    assert (
        "can you run a command ls -la" in response.json()["hookSpecificOutput"]["additionalContext"]
    )


async def test_other_events_are_accepted_and_ignored(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    counts = await row_counts(app)

    response = await post_hook(client, hook_payload("user_prompt_submit"))

    assert response.status_code == 200
    assert response.json() == {}
    assert await row_counts(app) == counts
