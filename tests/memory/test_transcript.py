"""Claude Code transcript import: real transcripts (tests/fixtures/claude-code), edge cases."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    ImageBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
)
from app.domain.usage import Usage
from app.memory.transcript import ImportedItem, ParsedTranscript, parse_transcript

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code"
MAIN = "fasthooks__sample_main_transcript.jsonl"
AGENT = "fasthooks__sample_agent_sidechain.jsonl"
USER_IMAGES = "session-share__images-in-user-messages.jsonl"
TOOL_IMAGES = "session-share__images-in-tool-results.jsonl"
VIEWER = "claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
RESUMED = "session-share__0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl"


@cache
def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@cache
def parsed(name: str) -> ParsedTranscript:
    return parse_transcript(fixture_text(name))


def json_entries(name: str) -> list[dict[str, Any]]:
    """The fixture's JSON objects, read directly (the `//` header lines left out)."""
    entries = []
    for line in fixture_text(name).split("\n"):
        if line.strip() and not line.startswith("//"):
            entries.append(json.loads(line))
    return entries


def entry_line(*, type_: str = "user", content: Any = "hi", **fields: Any) -> str:
    entry: dict[str, Any] = {
        "type": type_,
        "uuid": f"u-{type_}",
        "timestamp": "2026-01-02T19:18:31.028Z",
        "sessionId": "s-1",
        "message": {"role": type_, "content": content},
    }
    entry.update(fields)
    return json.dumps(entry)


def kinds(items: list[ImportedItem]) -> Counter[str]:
    return Counter(item.payload.kind for item in items)


def without_usage(items: list[ImportedItem]) -> list[ImportedItem]:
    out = []
    for item in items:
        if isinstance(item.payload, AssistantMessage):
            payload = item.payload.model_copy(update={"usage": None})
            item = ImportedItem(item.source_id, payload, item.at, item.sidechain, item.agent_id)
        out.append(item)
    return out


# --- real transcripts ---------------------------------------------------------------------


def test_item_counts_match_a_direct_count_of_the_json() -> None:
    users = assistants = results = 0
    for entry in json_entries(MAIN):
        if entry["type"] == "assistant":
            assistants += 1
        if entry["type"] != "user" or entry.get("isCompactSummary") or entry.get("isMeta"):
            continue
        content = entry["message"]["content"]
        if isinstance(content, str):
            # a /compact typed at the prompt: its echo and output are the harness's
            users += not content.startswith(("<command-name>", "<local-command-stdout>"))
            continue
        results += sum(block["type"] == "tool_result" for block in content)
        users += any(block["type"] in ("text", "image") for block in content)

    counts = kinds(parsed(MAIN).items)

    assert (counts["user_message"], counts["assistant_message"], counts["tool_result"]) == (
        users,
        assistants,
        results,
    )
    assert (users, assistants, results) == (5, 28, 10)


def test_every_tool_result_answers_an_earlier_tool_use_of_the_main_thread() -> None:
    seen: set[str] = set()
    results = 0
    for item in parsed(MAIN).items:
        assert not item.sidechain
        if isinstance(item.payload, AssistantMessage):
            seen.update(b.id for b in item.payload.content if isinstance(b, ToolUseBlock))
        elif isinstance(item.payload, ToolResult):
            results += 1
            assert item.payload.tool_use_id in seen
            assert item.source_id == f"{item.payload.tool_use_id}:result"
    assert results == 10


def test_tool_errors_keep_is_error() -> None:
    errors = {
        block["tool_use_id"]
        for entry in json_entries(MAIN)
        if entry["type"] == "user" and isinstance(entry["message"]["content"], list)
        for block in entry["message"]["content"]
        if block.get("is_error") is True
    }

    flagged = {
        item.payload.tool_use_id
        for item in parsed(MAIN).items
        if isinstance(item.payload, ToolResult) and item.payload.is_error
    }

    assert flagged == errors
    assert len(errors) == 2


def test_thinking_blocks_become_thinking_blocks() -> None:
    expected = [
        (block["thinking"], block["signature"])
        for entry in json_entries(MAIN)
        if entry["type"] == "assistant"
        for block in entry["message"]["content"]
        if block["type"] == "thinking"
    ]

    thinking = [
        (block.thinking, block.signature)
        for item in parsed(MAIN).items
        if isinstance(item.payload, AssistantMessage)
        for block in item.payload.content
        if isinstance(block, ThinkingBlock)
    ]

    assert thinking == expected
    assert len(thinking) == 12


def test_the_compact_summary_entry_becomes_a_compact_summary() -> None:
    (entry,) = [e for e in json_entries(MAIN) if e.get("isCompactSummary")]

    summaries = [item for item in parsed(MAIN).items if isinstance(item.payload, CompactSummary)]

    assert [(s.source_id, s.payload) for s in summaries] == [
        (entry["uuid"], CompactSummary(text=entry["message"]["content"]))
    ]


@pytest.mark.parametrize("name", [USER_IMAGES, TOOL_IMAGES])
def test_session_share_comment_lines_are_problems_at_lines_1_and_2(name: str) -> None:
    text = fixture_text(name)
    rest = text.split("\n", 2)[2]

    result = parsed(name)

    assert [p.line for p in result.problems] == [1, 2]
    assert all(p.reason.startswith("not JSON: ") for p in result.problems)
    assert result.items
    assert result.items == parse_transcript(rest, first_line=3).items


def test_pasted_images_become_image_blocks_in_a_user_message() -> None:
    sources = [
        block["source"]
        for entry in json_entries(USER_IMAGES)
        if entry["type"] == "user" and isinstance(entry["message"]["content"], list)
        for block in entry["message"]["content"]
        if block["type"] == "image"
    ]

    images = [
        block.source
        for item in parsed(USER_IMAGES).items
        if isinstance(item.payload, UserMessage)
        for block in item.payload.content
        if isinstance(block, ImageBlock)
    ]

    assert images == sources
    assert len(images) == 2
    assert images[0] is not None and images[0]["media_type"] == "image/png"


def test_a_user_entry_mixing_text_and_an_image_is_one_user_message() -> None:
    (entry,) = [
        e
        for e in json_entries(USER_IMAGES)
        if e["type"] == "user"
        and isinstance(e["message"]["content"], list)
        and len(e["message"]["content"]) == 3
    ]

    (item,) = [i for i in parsed(USER_IMAGES).items if i.source_id == entry["uuid"]]

    assert isinstance(item.payload, UserMessage)
    # the IDE's `<ide_opened_file>` note in front is the harness's, kept apart
    assert [b.type for b in item.payload.content] == ["image", "text"]


def test_a_tool_result_holding_an_image_keeps_list_content() -> None:
    (block,) = [
        b
        for e in json_entries(TOOL_IMAGES)
        if e["type"] == "user"
        for b in e["message"]["content"]
        if b["type"] == "tool_result"
    ]

    (result,) = [i.payload for i in parsed(TOOL_IMAGES).items if isinstance(i.payload, ToolResult)]

    assert isinstance(result.content, list)
    assert [b.type for b in result.content] == ["text", "image"]
    text, image = result.content
    assert isinstance(text, TextBlock) and isinstance(image, ImageBlock)
    assert text.text == block["content"][0]["text"]
    assert image.source == block["content"][1]["source"]
    assert image.source is not None and len(image.source["data"]) > 500_000


def test_inline_sidechain_entries_are_flagged() -> None:
    sidechain_of: dict[str, bool] = {}
    for entry in json_entries(VIEWER):
        if entry["type"] not in ("user", "assistant"):
            continue
        sidechain_of[entry["uuid"]] = entry["isSidechain"]
        content = entry["message"]["content"]
        for block in content if isinstance(content, list) else []:
            if block["type"] == "tool_result":
                sidechain_of[f"{block['tool_use_id']}:result"] = entry["isSidechain"]

    result = parsed(VIEWER)

    assert json_entries(VIEWER)[0]["type"] == "summary"
    assert result.problems == []
    for item in result.items:
        assert item.sidechain == sidechain_of[item.source_id], item.source_id
    flags = Counter(item.sidechain for item in result.items)
    assert flags[True] > 300 and flags[False] > 20


def test_a_subagent_file_carries_its_agent_id() -> None:
    items = parsed(AGENT).items

    assert kinds(items) == Counter({"user_message": 1, "assistant_message": 1})
    assert {(item.sidechain, item.agent_id) for item in items} == {(True, "af1ff21")}


def test_opaque_record_types_are_skipped_silently() -> None:
    entries = json_entries(RESUMED)
    opaque = {e["type"] for e in entries} - {"user", "assistant"}
    kept = "\n".join(
        line
        for line in fixture_text(RESUMED).split("\n")
        if line
        and (
            json.loads(line)["type"] in ("user", "assistant")
            or json.loads(line).get("operation") == "popAll"  # the user's typed words
        )
    )

    result = parsed(RESUMED)

    assert opaque >= {"queue-operation", "file-history-snapshot", "system", "progress", "summary"}
    assert result.problems == []
    assert result.items == parse_transcript(kept).items


def test_unknown_record_types_without_timestamps_are_no_problem() -> None:
    text = "\n".join(
        [
            json.dumps({"type": "last-prompt", "leafUuid": "x", "sessionId": "s-1"}),
            json.dumps({"type": "permission-mode", "permissionMode": "auto"}),
            json.dumps({"type": "some-future-record", "payload": [1, 2, 3]}),
            json.dumps({"no": "type at all"}),
        ]
    )

    assert parse_transcript(text) == ParsedTranscript([], [], "s-1", None)


def test_usage_is_counted_once_per_message_id() -> None:
    message_of = {
        e["uuid"]: e["message"]["id"] for e in json_entries(MAIN) if e["type"] == "assistant"
    }

    with_usage = Counter(
        message_of[item.source_id]
        for item in parsed(MAIN).items
        if isinstance(item.payload, AssistantMessage) and item.payload.usage is not None
    )

    assert with_usage == Counter(set(message_of.values()))
    assert len(message_of) == 28 and len(with_usage) == 12


def test_usage_takes_the_largest_count_a_message_id_repeats() -> None:
    lines: dict[str, list[dict[str, Any]]] = {}
    for entry in json_entries(MAIN):
        if entry["type"] == "assistant":
            lines.setdefault(entry["message"]["id"], []).append(entry)
    first_uuid = {mid: group[0]["uuid"] for mid, group in lines.items()}
    final_output = {
        mid: max(e["message"]["usage"]["output_tokens"] for e in group)
        for mid, group in lines.items()
    }

    output = {
        item.source_id: item.payload.usage.output_tokens
        for item in parsed(MAIN).items
        if isinstance(item.payload, AssistantMessage) and item.payload.usage is not None
    }

    assert output == {first_uuid[mid]: tokens for mid, tokens in final_output.items()}
    # the Write call of 2.0.76: 8 output tokens on its thinking line, 231 on its tool_use line
    assert 231 in output.values()


def test_entry_timestamps_become_aware_utc_datetimes() -> None:
    first = parsed(MAIN).items[0]

    assert first.at == datetime(2026, 1, 2, 19, 18, 31, 28000, tzinfo=UTC)
    assert all(item.at.tzinfo is UTC for item in parsed(MAIN).items)


def test_session_id_and_cwd_come_from_the_entries() -> None:
    result = parsed(MAIN)

    assert (result.session_id, result.cwd) == ("c45af7b1-cb7c-4e51-93db-8cbb250a877a", "/workspace")


def test_ansi_escapes_are_kept_as_written() -> None:
    (entry,) = [
        e
        for e in json_entries(MAIN)
        if e["type"] == "user" and "\x1b[2m" in str(e["message"]["content"])
    ]

    (item,) = [i for i in parsed(MAIN).items if i.source_id == entry["uuid"]]

    # a local command's output (the harness's, so a system message), escapes and all
    assert isinstance(item.payload, SystemMessage)
    assert "\x1b[2mCompacted (ctrl+o to see full summary)\x1b[22m" in item.payload.text


def test_parsing_in_chunks_at_api_message_boundaries_equals_parsing_whole() -> None:
    lines = fixture_text(MAIN).split("\n")
    whole = parsed(MAIN)
    groups: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        if line and (entry := json.loads(line))["type"] == "assistant":
            groups.setdefault(entry["message"]["id"], []).append(index)
    inside = {k for group in groups.values() for k in range(group[0] + 1, group[-1] + 1)}

    for k in range(len(lines)):
        if k in inside:
            continue
        head = parse_transcript("\n".join(lines[:k]) + "\n")
        tail = parse_transcript("\n".join(lines[k:]), first_line=k + 1)
        assert head.items + tail.items == whole.items, k
        assert head.problems + tail.problems == whole.problems, k


def test_a_chunk_split_inside_one_api_message_changes_only_its_usage() -> None:
    lines = fixture_text(MAIN).split("\n")
    whole = parsed(MAIN)

    for k in range(len(lines)):
        head = parse_transcript("\n".join(lines[:k]) + "\n")
        tail = parse_transcript("\n".join(lines[k:]), first_line=k + 1)
        assert without_usage(head.items + tail.items) == without_usage(whole.items), k


def test_chunk_line_numbers_continue_from_first_line() -> None:
    text = fixture_text(USER_IMAGES)
    first, rest = text.split("\n", 1)

    assert [p.line for p in parse_transcript(first + "\n").problems] == [1]
    assert [p.line for p in parse_transcript(rest, first_line=2).problems] == [2]


def test_parsing_the_same_text_twice_gives_equal_results() -> None:
    text = fixture_text(VIEWER)

    assert parse_transcript(text) == parse_transcript(text)


# --- edge cases -----------------------------------------------------------------------------


def test_a_truncated_last_line_is_a_problem_and_the_rest_parses() -> None:
    lines = fixture_text(MAIN).rstrip("\n").split("\n")
    truncated = "\n".join([*lines[:-1], lines[-1][: len(lines[-1]) // 2]])

    result = parse_transcript(truncated)

    assert [p.line for p in result.problems] == [len(lines)]
    assert result.problems[0].reason.startswith("not JSON: ")
    assert result.items == parsed(MAIN).items[:-1]


def test_a_json_line_that_is_not_an_object_is_a_problem() -> None:
    text = "\n".join([entry_line(), "[1,2]", '"text"', "null"])

    result = parse_transcript(text)

    assert [(p.line, p.reason) for p in result.problems] == [
        (2, "not a JSON object: array"),
        (3, "not a JSON object: string"),
        (4, "not a JSON object: null"),
    ]
    assert kinds(result.items) == Counter({"user_message": 1})


def test_a_1_mb_text_line_parses() -> None:
    big = "x" * 1_048_576

    (item,) = parse_transcript(entry_line(content=big)).items

    assert item.payload == UserMessage(content=[TextBlock(text=big)])


def test_blank_lines_are_ignored_but_counted() -> None:
    text = "\n\n   \r\n" + "{oops\n"

    assert [(p.line, p.reason) for p in parse_transcript(text).problems] == [
        (4, "not JSON: Expecting property name enclosed in double quotes")
    ]


def test_an_entry_without_a_usable_timestamp_is_a_problem() -> None:
    missing = json.loads(entry_line())
    del missing["timestamp"]
    text = "\n".join([json.dumps(missing), entry_line(timestamp="yesterday")])

    result = parse_transcript(text)

    assert [(p.line, p.reason) for p in result.problems] == [
        (1, "no timestamp"),
        (2, "bad timestamp: 'yesterday'"),
    ]
    assert result.items == []


def test_a_timestamp_without_offset_is_taken_as_utc() -> None:
    (item,) = parse_transcript(entry_line(timestamp="2026-01-02T19:18:31")).items

    assert item.at == datetime(2026, 1, 2, 19, 18, 31, tzinfo=UTC)


def test_empty_user_entries_are_skipped() -> None:
    text = "\n".join(
        [entry_line(content=""), entry_line(content=[]), entry_line(content=[{"type": "text"}])]
    )

    assert parse_transcript(text) == ParsedTranscript([], [], "s-1", None)


def test_a_user_entry_without_a_message_is_a_problem() -> None:
    entry = json.loads(entry_line())
    del entry["message"]

    result = parse_transcript(json.dumps(entry))

    assert [(p.line, p.reason) for p in result.problems] == [(1, "user entry without a message")]


def test_tool_results_come_before_the_user_text_of_the_same_entry() -> None:
    content = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"},
        {"type": "text", "text": "and now this"},
    ]

    items = parse_transcript(entry_line(content=content)).items

    assert [(i.source_id, i.payload) for i in items] == [
        ("toolu_1:result", ToolResult(tool_use_id="toolu_1", content="done")),
        ("u-user", UserMessage(content=[TextBlock(text="and now this")])),
    ]


def test_tool_result_content_of_other_block_types_becomes_text() -> None:
    reference = {"type": "tool_reference", "tool_name": "WebFetch"}
    as_text = TextBlock(text=json.dumps(reference, sort_keys=True))
    content = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [reference]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True},
    ]

    items = parse_transcript(entry_line(content=content)).items

    assert [i.payload for i in items] == [
        ToolResult(tool_use_id="toolu_1", content=[as_text]),
        ToolResult(tool_use_id="toolu_2", content="", is_error=True),
    ]


def test_a_tool_result_without_tool_use_id_is_a_problem() -> None:
    content = [{"type": "tool_result", "content": "lost"}, {"type": "text", "text": "hi"}]

    result = parse_transcript(entry_line(content=content))

    assert [(p.line, p.reason) for p in result.problems] == [(1, "tool_result without tool_use_id")]
    assert kinds(result.items) == Counter({"user_message": 1})


def test_a_tool_call_id_the_messages_api_refuses_is_rewritten_alike_in_call_and_result() -> None:
    """Two posts: the call, then its result; both ids come out in the API's shape and equal."""
    bad = 'toolu_1"><b id="injected">'
    call = {"type": "tool_use", "id": bad, "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": bad, "content": "a.txt"}

    (use,) = parse_transcript(entry_line(type_="assistant", content=[call])).items
    (answer,) = parse_transcript(entry_line(content=[result]), first_line=2).items

    assert isinstance(use.payload, AssistantMessage) and isinstance(answer.payload, ToolResult)
    [block] = use.payload.content
    assert isinstance(block, ToolUseBlock)
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", block.id)
    assert answer.payload.tool_use_id == block.id
    assert answer.source_id == f"{block.id}:result"


def test_redacted_and_unknown_assistant_blocks_are_dropped() -> None:
    message = {
        "id": "msg_1",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "answer"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 5, "service_tier": "standard"},
    }
    only_redacted = {**message, "content": [{"type": "redacted_thinking", "data": "x"}]}
    text = "\n".join(
        [
            entry_line(type_="assistant", message=only_redacted),
            entry_line(type_="assistant", message=message),
        ]
    )

    (item,) = parse_transcript(text).items

    assert item.payload == AssistantMessage(
        content=[TextBlock(text="answer")],
        model="claude-sonnet-4-5",
        stop_reason="end_turn",
        usage=Usage(input_tokens=3, output_tokens=5),
    )


def test_a_hook_attachment_becomes_a_system_message() -> None:
    attachment = {
        "type": "hook_success",
        "hookName": "SessionStart:startup",
        "hookEvent": "SessionStart",
        "toolUseID": "toolu_9",
        "content": "remember the plan",
        "stdout": "remember the plan",
        "stderr": "",
        "exitCode": 0,
        "command": "bd prime",
        "durationMs": 116,
    }
    line = entry_line(type_="attachment", attachment=attachment, isSidechain=True, agentId="a1")

    (item,) = parse_transcript(line).items

    assert (item.source_id, item.sidechain, item.agent_id) == ("u-attachment", True, "a1")
    assert item.payload == SystemMessage(
        text="hook_success: SessionStart:startup\ncommand: bd prime\nexit code: 0\n"
        "tool use: toolu_9\nremember the plan"
    )


def test_hook_output_falls_back_to_stdout_and_shows_stderr() -> None:
    attachment = {
        "type": "hook_non_blocking_error",
        "hookEvent": "PreToolUse",
        "content": "",
        "stdout": "partial",
        "stderr": "[rtk] WARNING: not installed",
        "exitCode": 1,
    }

    (item,) = parse_transcript(entry_line(type_="attachment", attachment=attachment)).items

    assert item.payload == SystemMessage(
        text="hook_non_blocking_error: PreToolUse\nexit code: 1\npartial\n"
        "stderr: [rtk] WARNING: not installed"
    )


def test_other_attachments_render_their_content_and_fields() -> None:
    context = {"type": "hook_additional_context", "hookEvent": "Stop", "content": ["a", "b"]}
    listing = {"type": "skill_listing", "content": "- skill: demo", "skillCount": 1}
    delta = {"type": "deferred_tools_delta", "addedNames": ["x"]}
    text = "\n".join(
        entry_line(type_="attachment", attachment=a, uuid=f"a{n}")
        for n, a in enumerate([context, listing, delta])
    )

    items = parse_transcript(text).items

    assert [i.payload for i in items] == [
        SystemMessage(text="hook_additional_context: Stop\na\nb"),
        SystemMessage(text='skill_listing\n- skill: demo\n{"skillCount": 1}'),
        SystemMessage(text='deferred_tools_delta\n{"addedNames": ["x"]}'),
    ]


def test_entries_without_uuid_get_a_stable_source_id() -> None:
    entry = json.loads(entry_line())
    del entry["uuid"]
    line = json.dumps(entry)

    (first,) = parse_transcript(line).items
    (again,) = parse_transcript("\n\n" + line, first_line=40).items
    (other,) = parse_transcript(line.replace('"hi"', '"ho"')).items

    assert first.source_id.startswith("sha256:")
    assert first.source_id == again.source_id != other.source_id
