"""Compaction, the pure part: the summary request and the new segment's opening.

The summary model sees the segment as a transcript and the whole task list; it
gets no tools, so it cannot change tasks. The new segment then opens with the
summary, the full task snapshot as a system message, and a TaskList call with
its result: the agent re-reads its tasks before doing anything else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    ItemPayload,
    SystemMessage,
    TaskEvent,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
)
from app.engine.llm import LLMRequest, Message, Usage

SUMMARY_SYSTEM = (
    "You compact the conversation of an AI agent so that it can continue its work without "
    "the transcript. Write a dense summary: the user's goals and constraints, decisions and "
    "their reasons, what was done and found (files, commands, results, errors), open "
    "questions, and the next steps. The agent's task list is attached: you may mention open "
    "tasks, but you cannot change them, and the agent will get the full list separately."
)


def context_ratio(usage: Usage, window_tokens: int) -> float:
    return usage.context_tokens / window_tokens if window_tokens > 0 else 0.0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


def _text(blocks: Sequence[object]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def transcript(items: Sequence[ItemPayload], item_max_chars: int) -> str:
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
    return "\n".join(lines)


def summary_request(
    items: Sequence[ItemPayload],
    task_snapshot: str,
    *,
    model: str,
    max_tokens: int,
    item_max_chars: int,
) -> LLMRequest:
    prompt = (
        f"<transcript>\n{transcript(items, item_max_chars)}\n</transcript>\n\n"
        f"<task-list>\n{task_snapshot}\n</task-list>\n\n"
        "Write the summary now."
    )
    return LLMRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=[Message(role="user", content=[TextBlock(text=prompt)])],
        tools=[],
        max_tokens=max_tokens,
    )


def snapshot_message(task_snapshot: str) -> SystemMessage:
    return SystemMessage(
        text=(
            "The conversation was compacted. Your task list is kept whole; here it is, "
            f"every status included:\n{task_snapshot}"
        )
    )


def opening_items(
    summary: str, task_snapshot: str, task_list_output: str, call_id: str
) -> list[ItemPayload]:
    """What a new segment starts with, in order."""
    return [
        CompactSummary(text=summary),
        snapshot_message(task_snapshot),
        AssistantMessage(content=[ToolUseBlock(id=call_id, name="TaskList", input={})]),
        ToolResult(tool_use_id=call_id, content=task_list_output, name="TaskList"),
    ]
