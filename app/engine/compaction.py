"""Compaction, the pure part: the summary request and the new segment's opening.

The summary model sees the segment as a transcript and the whole task list; it
gets no tools, so it cannot change tasks. Its request is held under the window:
when the transcript is too long, its oldest entries are left out (and counted).

The new segment then opens with the summary and the full task snapshot as a system
note. Only a session that offers the task tools, and has tasks, also gets a `TaskList`
call with its result (the agent re-reads its tasks before doing anything else): in a
session without tools a tool call in the log would make every later request invalid,
and an empty list needs no re-reading.

A turn compacted before the model answered its user message carries that message over
(`carried_input`): it is left out of the summary and follows the opening, verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.domain.files import block_placeholder
from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    DocumentBlock,
    ImageBlock,
    ItemPayload,
    SystemMessage,
    TaskEvent,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
)
from app.engine.context import BLOCK_OVERHEAD_CHARS, DEFAULT_CHARS_PER_TOKEN
from app.engine.llm import LLMRequest, Message

SUMMARY_SYSTEM = (
    "You compact the conversation of an AI agent so that it can continue its work without "
    "the transcript. Write a dense summary: the user's goals and constraints, decisions and "
    "their reasons, what was done and found (files, commands, results, errors), open "
    "questions, and the next steps. The agent's task list is attached: you may mention open "
    "tasks, but you cannot change them, and the agent will get the full list separately."
)


_PROMPT_FRAME = (
    "<transcript>\n{transcript}\n</transcript>\n\n"
    "<task-list>\n{tasks}\n</task-list>\n\n"
    "Write the summary now."
)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


def _text(blocks: Sequence[object]) -> str:
    """The blocks' text; an image or document as its placeholder (`[image: plan.png
    1200x800]`, with a multiplication sign): the summary request carries no file, so it
    always fits, and the new segment still says what was attached."""
    return "\n".join(
        b.text if isinstance(b, TextBlock) else block_placeholder(b)
        for b in blocks
        if isinstance(b, TextBlock | ImageBlock | DocumentBlock)
    )


def transcript(
    items: Sequence[ItemPayload], item_max_chars: int, max_chars: int | None = None
) -> str:
    """The segment as tagged lines; with `max_chars`, the newest lines that fit, after a
    line counting the entries left out."""
    lines = _transcript_lines(items, item_max_chars)
    if max_chars is None or sum(len(line) + 1 for line in lines) <= max_chars:
        return "\n".join(lines)
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > max_chars - 120:  # room for the line that counts
            break
        kept.append(line)
        used += len(line) + 1
    left_out = len(lines) - len(kept)
    marker = f"[{left_out} earlier entries left out to fit the summary model's context]"
    return "\n".join([marker, *reversed(kept)])


def _transcript_lines(items: Sequence[ItemPayload], item_max_chars: int) -> list[str]:
    lines: list[str] = []
    for item in items:
        if isinstance(item, UserMessage):
            lines.append(f"[user] {_clip(_text(item.content), item_max_chars)}")
        elif isinstance(item, AssistantMessage):
            if said := _text(item.content):
                lines.append(f"[assistant] {_clip(said, item_max_chars)}")
            for block in item.content:
                if isinstance(block, ToolUseBlock):
                    call = json.dumps(block.input, ensure_ascii=False)
                    lines.append(f"[tool call {block.name}] {_clip(call, item_max_chars)}")
        elif isinstance(item, ToolResult):
            body = item.content if isinstance(item.content, str) else _text(item.content)
            mark = "tool error" if item.is_error else "tool result"
            lines.append(f"[{mark}] {_clip(body, item_max_chars)}")
        elif isinstance(item, SystemMessage):
            lines.append(f"[system] {_clip(item.text, item_max_chars)}")
        elif isinstance(item, CompactSummary):
            lines.append(f"[earlier summary] {item.text}")
        elif isinstance(item, TaskEvent):
            lines.append(f"[task change by a user] {item.op} {json.dumps(item.input)}")
    return lines


def carried_input(
    items: Sequence[ItemPayload], message: ItemPayload | None
) -> tuple[list[ItemPayload], ItemPayload | None]:
    """The items to summarize, and the turn's user message to carry over: its last
    occurrence in the segment (the one the turn appended, or the copy an earlier
    compaction of the turn carried), when the model has said nothing after it."""
    at = next((i for i in range(len(items) - 1, -1, -1) if items[i] == message), None)
    if message is None or at is None:
        return list(items), None
    if any(isinstance(item, AssistantMessage) for item in items[at + 1 :]):
        return list(items), None
    return [*items[:at], *items[at + 1 :]], items[at]


def summary_request(
    items: Sequence[ItemPayload],
    task_snapshot: str,
    *,
    model: str,
    max_tokens: int,
    item_max_chars: int,
    max_input_tokens: int | None = None,
) -> LLMRequest:
    """The summary request; with `max_input_tokens`, its prompt fits that many tokens
    (the task list takes at most a quarter of them, the transcript the rest)."""
    budget = None
    if max_input_tokens is not None:
        framing = len(SUMMARY_SYSTEM) + len(_PROMPT_FRAME) + 4 * BLOCK_OVERHEAD_CHARS
        budget = max(0, int(max_input_tokens * DEFAULT_CHARS_PER_TOKEN) - framing)
        task_snapshot = _clip(task_snapshot, budget // 4)
        budget -= len(task_snapshot)
    prompt = _PROMPT_FRAME.format(
        transcript=transcript(items, item_max_chars, budget), tasks=task_snapshot
    )
    return LLMRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=[Message(role="user", content=[TextBlock(text=prompt)])],
        tools=[],
        max_tokens=max_tokens,
        cached=False,  # the transcript is this request's alone: a cache write never read
    )


SNAPSHOT_OPENING = "The conversation was compacted."
"""How a compaction's task snapshot message begins (in logs of every version)."""


def snapshot_message(task_snapshot: str) -> SystemMessage:
    """The snapshot as a system note; a snapshot cut to its budget ends saying how many of
    the tasks it shows, and the note claims no more than that."""
    return SystemMessage(
        text=(
            f"{SNAPSHOT_OPENING} Every task is kept; your task list, every status "
            f"included:\n{task_snapshot}"
        )
    )


def is_task_snapshot(item: ItemPayload) -> bool:
    """Whether an item is the task snapshot a compaction opened its segment with."""
    return isinstance(item, SystemMessage) and item.text.startswith(SNAPSHOT_OPENING)


def opening_items(
    summary: str,
    task_snapshot: str,
    task_list_output: str | None,
    call_id: str,
) -> list[ItemPayload]:
    """What a new segment starts with, in order; the `TaskList` pair only with its
    output (None: the session offers no task tools, or has no task)."""
    opening: list[ItemPayload] = [CompactSummary(text=summary), snapshot_message(task_snapshot)]
    if task_list_output is not None:
        opening += [
            AssistantMessage(content=[ToolUseBlock(id=call_id, name="TaskList", input={})]),
            ToolResult(tool_use_id=call_id, content=task_list_output, name="TaskList"),
        ]
    return opening
