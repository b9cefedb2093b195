"""Claude Code memory that reaches the model, on real transcripts.

A chain that survives a missed SessionStart, harness messages that are no user turns, words
typed while Claude worked, turns posted after a merge, empty turns and the summary model,
tool names and errors in L3, and transcript paths confined to their folders."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from sqlmodel import col, select

from app.db.models import MemoryDetail
from tests.fakes.messages_api import FakeMessagesAPI, reply
from tests.support.apps import serve
from tests.support.chat import items, new_session, wait_job
from tests.support.memory import (
    SUMMARY_MODEL,
    Transcript,
    database_of,
    hook_payload,
    import_session,
    iso,
    jobs_of,
    memory_turns,
    post_hook,
    real_transcript,
    stop,
)

MAIN = "fasthooks__sample_main_transcript.jsonl"
RESUMED = "session-share__0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl"
USER_IMAGES = "session-share__images-in-user-messages.jsonl"
VIEWER = "claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
T0 = datetime(2026, 4, 16, 9, 0, tzinfo=UTC)


async def _session(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/sessions/{session_id}")).json()
    return body


async def _start(
    client: httpx.AsyncClient, cc_id: str, source: str = "startup", **extra: Any
) -> httpx.Response:
    payload = hook_payload("session_start_startup", session_id=cc_id, source=source, **extra)
    response = await post_hook(client, payload)
    assert response.status_code == 200, response.text
    return response


def _one_turn(cc_id: str, at: datetime, words: str, cwd: str = "/work/project") -> str:
    transcript = Transcript(cc_id, cwd=cwd)
    transcript.turn(at, f"{words}?", f"{words}.")
    return transcript.text()


# --- a missed SessionStart keeps the project's memory ---------------------------------------


async def test_a_session_first_seen_by_its_stop_continues_the_projects_newest_session(
    client: httpx.AsyncClient,
) -> None:
    first = await import_session(client, "cc-1", _one_turn("cc-1", T0, "alpha"))
    # cc-2's SessionStart never reached Strata (the server was down): its Stop is the first
    second = await import_session(client, "cc-2", _one_turn("cc-2", T0 + timedelta(hours=1), "b"))

    third = await _start(client, "cc-3", cwd="/work/project")

    assert (await _session(client, second))["continues_from"] == first
    context = third.json()["hookSpecificOutput"]["additionalContext"]
    assert "[user]: alpha?" in context and "[user]: b?" in context


async def test_a_resumed_session_from_before_the_install_joins_the_chain(
    client: httpx.AsyncClient,
) -> None:
    first = await import_session(client, "cc-1", _one_turn("cc-1", T0, "alpha"))

    resumed = await _start(client, "cc-old", source="resume", cwd="/work/project")

    old = resumed.headers["Strata-Session"]
    assert (await _session(client, old))["continues_from"] == first
    assert "[user]: alpha?" in resumed.json()["hookSpecificOutput"]["additionalContext"]


async def test_a_late_session_start_links_nothing_again(client: httpx.AsyncClient) -> None:
    first = await import_session(client, "cc-1", _one_turn("cc-1", T0, "alpha"))
    second = await import_session(client, "cc-2", _one_turn("cc-2", T0 + timedelta(hours=1), "b"))
    third = await import_session(client, "cc-3", _one_turn("cc-3", T0 + timedelta(hours=2), "c"))

    late = await _start(client, "cc-2", source="startup", cwd="/work/project")

    assert late.headers["Strata-Session"] == second
    assert (await _session(client, second))["continues_from"] == first
    assert (await _session(client, third))["continues_from"] == second


async def test_a_native_session_continuing_the_newest_claude_code_session_leaves_its_chain(
    client: httpx.AsyncClient,
) -> None:
    first = await import_session(client, "cc-1", _one_turn("cc-1", T0, "alpha"))
    await new_session(client, continues_from=first)

    second = await _start(client, "cc-2", cwd="/work/project")

    assert (await _session(client, second.headers["Strata-Session"]))["continues_from"] == first
    assert "[user]: alpha?" in second.json()["hookSpecificOutput"]["additionalContext"]


async def test_sessions_in_folders_of_one_git_root_share_a_chain(
    client: httpx.AsyncClient,
) -> None:
    payload = {"project_root": "/work/repo"}
    first = (
        await stop(
            client,
            "cc-a",
            _one_turn("cc-a", T0, "in app", cwd="/work/repo/app"),
            cwd="/work/repo/app",
            **payload,
        )
    ).headers["Strata-Session"]

    later = await _start(client, "cc-b", cwd="/work/repo/docs", **payload)

    assert (await _session(client, later.headers["Strata-Session"]))["continues_from"] == first


# --- harness messages are no user turns ----------------------------------------------------


async def test_harness_messages_of_real_transcripts_open_no_turn_and_stay_in_l3(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-resumed", real_transcript(RESUMED))

    turns = await memory_turns(app, session_id)
    said = [t.user_text for t in turns]
    for harness in ("<task-notification>", "<command-name>", "<local-command", "[Request inter"):
        assert not any(harness in text for text in said), harness
    assert not any("Publish the current session transcript" in text for text in said)  # isMeta
    log = await items(client, session_id)
    systems = [i["text"] for i in log if i["kind"] == "system"]
    assert any(s.startswith("<task-notification>") for s in systems)
    assert "slash command: /publish-session" in systems
    assert "[Request interrupted by user]" in systems
    async with database_of(app).read() as db:
        kinds = (await db.exec(select(MemoryDetail.kind, MemoryDetail.text))).all()
    assert any(k == "system" and t.startswith("<task-notification>") for k, t in kinds)


async def test_a_slash_commands_arguments_are_the_users_words_in_l2(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-viewer", real_transcript(VIEWER))

    turns = await memory_turns(app, session_id)

    assert any(t.user_text == "/orchestrator create TODO app by Next.js" for t in turns)


async def test_ide_notes_are_kept_apart_from_the_users_words(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-ide", real_transcript(USER_IMAGES))

    turns = await memory_turns(app, session_id)

    assert turns
    assert not any("<ide_opened_file>" in t.user_text for t in turns)


async def test_a_local_command_caveat_is_kept_nowhere(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-main", real_transcript(MAIN))

    log = json.dumps(await items(client, session_id))
    turns = await memory_turns(app, session_id)

    assert "Caveat: The messages below were generated" not in log
    assert "[user]" not in "".join(t.user_text for t in turns)


# --- what the user types while Claude works is kept ----------------------------------------


async def test_words_typed_while_claude_worked_are_the_users_in_their_turn(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-resumed", real_transcript(RESUMED))

    [first, *_] = await memory_turns(app, session_id)

    assert first.user_text.startswith("Spaw sub-agents to write poems")
    assert first.user_text.endswith("is the 3rd tool still running?\n\n??")


async def test_a_queued_command_delivered_into_the_running_turn_joins_it(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = Transcript("cc-queued")
    transcript.user(T0, "refactor the parser")
    queued = {"type": "queued_command", "prompt": "also keep the old API", "commandMode": "prompt"}
    transcript.add(transcript._entry("attachment", T0 + timedelta(seconds=5), attachment=queued))
    transcript.assistant(T0 + timedelta(seconds=9), {"type": "text", "text": "Done, both."})

    session_id = await import_session(client, "cc-queued", transcript.text())

    [turn] = await memory_turns(app, session_id)
    assert turn.user_text == "refactor the parser\n\nalso keep the old API"
    assert turn.assistant_text == "Done, both."


async def test_a_queued_message_removed_into_the_running_turn_is_the_users_in_it(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    # Claude Code 2.1.39: the message is enqueued, handed to the running turn inside a tool
    # result, and removed from the queue; no user entry or attachment carries it
    transcript = Transcript("cc-2139")
    transcript.user(T0, "refactor the parser")
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    transcript.assistant(T0 + timedelta(seconds=2), call)
    words = "also keep the old API"
    queued = {"type": "queue-operation", "sessionId": "cc-2139"}
    transcript.add(
        {
            **queued,
            "operation": "enqueue",
            "timestamp": iso(T0 + timedelta(seconds=3)),
            "content": words,
        }
    )
    result = f"parser.py\n\nThe user sent a new message while you were working:\n{words}"
    transcript.user(
        T0 + timedelta(seconds=4),
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}],
    )
    transcript.add({**queued, "operation": "remove", "timestamp": iso(T0 + timedelta(seconds=4))})
    transcript.assistant(T0 + timedelta(seconds=9), {"type": "text", "text": "Done, both."})

    session_id = await import_session(client, "cc-2139", transcript.text())

    [turn] = await memory_turns(app, session_id)
    assert turn.user_text == "refactor the parser\n\nalso keep the old API"


# --- what every session repeats is kept once -----------------------------------------------


def _with_skill_listing(cc_id: str, at: datetime, listing: str) -> str:
    transcript = Transcript(cc_id)
    skills = {"type": "skill_listing", "content": listing}
    transcript.add(transcript._entry("attachment", at - timedelta(minutes=1), attachment=skills))
    transcript.turn(at, f"{cc_id}?", f"{cc_id}.")
    return transcript.text()


async def test_an_attachment_every_session_repeats_is_stored_once_per_chain(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    listing = "- frontend-design: Create distinctive, production-grade interfaces\n" * 40
    for n in range(3):
        cc_id = f"cc-{n}"
        await import_session(
            client, cc_id, _with_skill_listing(cc_id, T0 + timedelta(hours=n), listing)
        )

    async with database_of(app).read() as db:
        texts = (await db.exec(select(MemoryDetail.text))).all()

    assert sum("frontend-design" in text for text in texts) == 1


# --- turns posted after a merge ------------------------------------------------------------


async def test_turns_posted_after_a_merge_land_in_the_target(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    transcript = Transcript("cc-src")
    transcript.turn(T0, "first question", "first answer")
    source = await import_session(client, "cc-src", transcript.text())
    target = await import_session(
        client, "cc-tgt", _one_turn("cc-tgt", T0 - timedelta(hours=1), "t")
    )
    # cc-tgt continues cc-src (same project); merged into it, its later turns go there
    merged = await client.post(f"/sessions/{target}/merge", json={"into": source})
    assert merged.status_code == 200, merged.text
    earlier = len(transcript.lines)
    transcript.turn(T0 + timedelta(minutes=5), "after the merge", "still here")

    late = await stop(client, "cc-tgt", "".join(line + "\n" for line in transcript.lines[earlier:]))
    again = await stop(client, "cc-tgt", _one_turn("cc-tgt", T0 - timedelta(hours=1), "t"))

    assert late.headers["Strata-Session"] == source
    assert again.headers["Strata-Imported"] == "0"  # what it held before the merge is known
    nxt = await _start(client, "cc-next", cwd="/work/project")
    context = nxt.json()["hookSpecificOutput"]["additionalContext"]
    assert "[user]: after the merge" in context
    detail = await client.get(f"/sessions/{nxt.headers['Strata-Session']}/detail/09:05:00")
    assert detail.status_code == 200, detail.text
    assert detail.json()["data"][0]["user_text"] == "after the merge"


async def test_turns_without_l2_are_never_sent_to_the_summary_model(
    agent_client: httpx.AsyncClient, agent_app: FastAPI, fake_llm: FakeMessagesAPI
) -> None:
    transcript = Transcript("cc-empty")
    for i in range(3):  # turns of harness messages and tool calls only: no L2
        at = T0 + timedelta(minutes=i)
        transcript.add(
            transcript._entry(
                "user",
                at,
                message={"role": "user", "content": "<task-notification>x</task-notification>"},
            )
        )
    for i in range(21):
        transcript.turn(T0 + timedelta(hours=1, minutes=i), f"question {i}", f"answer {i}")
    fake_llm.always(lambda body: reply("s"))

    session_id = await import_session(agent_client, "cc-empty", transcript.text())
    [job] = await jobs_of(agent_client, session_id, "summary")
    await wait_job(agent_client, job["id"])

    prompts = [str(r.body["messages"]) for r in fake_llm.requests]
    assert {r.body["model"] for r in fake_llm.requests} == {SUMMARY_MODEL}
    assert len(prompts) == 1  # question 0 only: turn 0 (the notifications) has no L2
    assert "question 0" in prompts[0]
    [empty] = [t for t in await memory_turns(agent_app, session_id) if t.turn == 0]
    assert (empty.user_text, empty.assistant_text, empty.l1) == ("", "", "")


async def test_l3_tool_outputs_carry_the_tool_name_and_the_error_flag(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session_id = await import_session(client, "cc-main", real_transcript(MAIN))

    async with database_of(app).read() as db:
        query = select(MemoryDetail).where(
            MemoryDetail.origin_session_id == session_id, MemoryDetail.kind == "tool_output"
        )
        outputs = (await db.exec(query.order_by(col(MemoryDetail.id)))).all()

    assert outputs and all(o.tool_name for o in outputs)
    failed = [o for o in outputs if o.is_error]
    assert failed and all(not o.is_error for o in outputs if o not in failed)


async def test_transcript_paths_outside_the_configured_folders_are_refused_with_403(
    make_settings: Any, tmp_path: Path
) -> None:
    inside = tmp_path / "projects" / "-work-project" / "cc-path.jsonl"
    inside.parent.mkdir(parents=True)
    inside.write_text(_one_turn("cc-path", T0, "from disk"))
    outside = tmp_path / "secret.jsonl"
    outside.write_text(inside.read_text())
    escape = inside.parent / ".." / ".." / "secret.jsonl"
    settings = make_settings(
        hook_read_transcript_path=True, hook_transcript_roots=str(tmp_path / "projects")
    )

    async with serve(settings) as (_, client):
        taken = await post_hook(client, hook_payload("stop", transcript_path=str(inside)))
        refused = await post_hook(client, hook_payload("stop", transcript_path=str(outside)))
        escaped = await post_hook(client, hook_payload("stop", transcript_path=str(escape)))
        system = await post_hook(client, hook_payload("stop", transcript_path="/etc/passwd"))

    assert taken.status_code == 200, taken.text
    assert taken.headers["Strata-Imported"] == "2"
    for response in (refused, escaped, system):
        assert response.status_code == 403, response.text
        assert response.json()["type"].endswith("forbidden")


# --- a turn's detail (250-590 KB on real transcripts) is filtered and paged ----------------


async def _big_output_session(client: httpx.AsyncClient) -> tuple[str, str]:
    log = "".join(f"{i:06d} compiling module_{i}.py\n" for i in range(15_000))
    transcript = Transcript("cc-build")
    transcript.turn(T0, "build it", "Built, one warning.", tool=("Bash", {"command": "make"}, log))
    await import_session(client, "cc-build", transcript.text())
    head = await _start(client, "cc-build-2", cwd="/work/project")
    return head.headers["Strata-Session"], log


async def test_a_detail_look_up_is_one_bounded_page_and_says_how_many_there_are(
    client: httpx.AsyncClient,
) -> None:
    head, raw = await _big_output_session(client)
    log = raw.rstrip("\n")  # as stored: the noise rules drop the trailing blank line
    assert len(log) > 400_000

    first = (await client.get(f"/sessions/{head}/detail/09:00:00")).json()
    second = (await client.get(f"/sessions/{head}/detail/09:00:00", params={"page": 2})).json()

    assert len(first["text"]) <= 8_000 and len(second["text"]) <= 8_000
    assert first["pages"] > 50 and first["next_page"] == 2
    assert first["total_chars"] > len(log)
    [output] = second["data"][0]["details"]["tool_output"]
    assert output["tool_name"] == "Bash" and output["length"] == len(log)
    assert log[output["offset"] :].startswith(output["text"])


async def test_detail_filters_by_kind_and_grep_before_paging(client: httpx.AsyncClient) -> None:
    head, _ = await _big_output_session(client)
    url = f"/sessions/{head}/detail/2026-04-16 09:00"

    inputs = (await client.get(url, params={"kind": "tool_input"})).json()
    found = (await client.get(url, params={"grep": "module_12345.py"})).json()
    bad = await client.get(url, params={"kind": "thinking"})

    assert inputs["pages"] == 1 and '{"command":"make"}' in inputs["text"]
    assert "[user]" not in inputs["text"]
    assert found["pages"] == 1
    assert found["text"].endswith("L12346: 012345 compiling module_12345.py")
    assert bad.status_code == 422


async def test_a_dated_time_matches_only_that_day(client: httpx.AsyncClient) -> None:
    transcript = Transcript("cc-days")
    transcript.turn(T0, "monday", "yes")
    transcript.turn(T0 + timedelta(days=1), "tuesday", "yes")
    await import_session(client, "cc-days", transcript.text())
    head = (await _start(client, "cc-days-2", cwd="/work/project")).headers["Strata-Session"]

    any_day = (await client.get(f"/sessions/{head}/detail/09:00:00")).json()
    tuesday = (await client.get(f"/sessions/{head}/detail/2026-04-17 09:00:00")).json()

    assert [t["user_text"] for t in any_day["data"]] == ["tuesday", "monday"]
    assert [t["user_text"] for t in tuesday["data"]] == ["tuesday"]


async def test_a_turn_on_the_last_day_of_a_month_is_found_by_its_date(
    client: httpx.AsyncClient,
) -> None:
    """The detail path's pattern takes every day of a month: `/sc-detail 2026-03-31 …` too."""
    last_day = datetime(2026, 3, 31, 9, 0, 0, tzinfo=UTC)
    transcript = Transcript("cc-month-end")
    transcript.turn(last_day, "quarter close", "closed")
    await import_session(client, "cc-month-end", transcript.text())
    head = (await _start(client, "cc-month-end-2", cwd="/work/project")).headers["Strata-Session"]

    found = await client.get(f"/sessions/{head}/detail/2026-03-31 09:00")
    iso = await client.get(f"/sessions/{head}/detail/2026-03-31T09:00:00Z")

    assert found.status_code == 200, found.text
    assert [t["user_text"] for t in found.json()["data"]] == ["quarter close"]
    assert iso.status_code == 200, iso.text


# --- a look-up matches the span a turn covers ----------------------------------------------


async def _long_turn(client: httpx.AsyncClient) -> str:
    """A turn prompted at 09:00:00 whose answer ended at 09:05:00."""
    transcript = Transcript("cc-span")
    transcript.user(T0, "migrate the schema")
    transcript.assistant(T0 + timedelta(minutes=5), {"type": "text", "text": "Migrated."})
    return await import_session(client, "cc-span", transcript.text())


async def test_a_turn_is_found_by_the_time_its_prompt_was_typed(
    client: httpx.AsyncClient,
) -> None:
    session_id = await _long_turn(client)

    found = await client.get(f"/sessions/{session_id}/detail/09:00:00")

    assert found.status_code == 200, found.text
    assert [t["user_text"] for t in found.json()["data"]] == ["migrate the schema"]


async def test_a_range_inside_a_turns_span_finds_it(client: httpx.AsyncClient) -> None:
    session_id = await _long_turn(client)

    found = await client.get(f"/sessions/{session_id}/detail/2026-04-16 09:01-09:02")

    assert found.status_code == 200, found.text
    assert [t["user_text"] for t in found.json()["data"]] == ["migrate the schema"]
