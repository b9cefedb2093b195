"""From a segment of the log to the messages of one LLM request (pure).

The log keeps each tool result as its own item; the Messages API wants the
results of one assistant turn together in the next user message, and roles that
alternate. System items and compaction summaries have no role of their own on
the wire, so they travel as tagged user text.

A request that defines no tools may hold no tool blocks (the API refuses it): a session
that used tools and then offers none still has their calls and results in its log. Its
messages then carry each call and each result as text instead (`tools_offered=False`),
built here once, so that what the request sizer counts is what is sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    ImageBlock,
    ItemPayload,
    Rewind,
    SystemMessage,
    TaskEvent,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
)
from app.domain.tasks import subject_line
from app.engine.compaction import is_task_snapshot
from app.engine.llm import Message, MessageBlock, Role, ToolResultBlock


class Conversation:
    """The messages of a growing segment, built as it grows.

    An agent step adds a few items to a segment of hundreds; a `Conversation` keeps the
    messages it built and, given the segment again, builds only those of the items after
    the ones it built. Messages are immutable, so each request gets a new list of the same
    messages. Whether the items given still begin with the ones it built is its owner's
    knowledge (`app.services.session_view`, which knows where the log it read ends): the
    owner calls `start_over` when it reads the segment again or a new one begins.

    `tools_offered` says whether the requests define tools; without, tool calls and
    results travel as text (see the module's docstring)."""

    def __init__(self, *, tools_offered: bool = True) -> None:
        self.tools_offered = tools_offered
        self._built = 0  # the items whose messages are built
        self._messages: list[Message] = []

    def messages(self, items: Sequence[ItemPayload]) -> list[Message]:
        if len(items) < self._built:  # fewer than it built: not the segment it knows
            self.start_over()
        for item in items[self._built :]:
            self._add(item)
            self._built += 1
        return list(self._messages)

    def start_over(self) -> None:
        """Forget the messages built: the next `messages` builds every item's."""
        self._built, self._messages = 0, []

    def _add(self, item: ItemPayload) -> None:
        role, blocks = _wire_blocks(item) if self.tools_offered else _text_blocks(item)
        if not blocks:
            return
        if self._messages and self._messages[-1].role == role:
            blocks = self._messages[-1].content + blocks
            self._messages.pop()
        # the API rejects a user message whose tool_result blocks do not come first
        ordered = sorted(blocks, key=lambda block: not isinstance(block, ToolResultBlock))
        # the blocks are valid models already; validating them again costs ~1 ms
        self._messages.append(Message.model_construct(role=role, content=tuple(ordered)))


def to_messages(items: Iterable[ItemPayload], *, tools_offered: bool = True) -> list[Message]:
    return Conversation(tools_offered=tools_offered).messages(list(items))


def with_text_at_end(messages: Sequence[Message], text: str) -> list[Message]:
    """`messages` with `text` as a block of its own at the end: the last block of the last
    message when that is a user message (after any tool results), else of a user message
    added; the messages themselves stay as they were. A block of its own, so that the
    block before it, which later requests send too, can carry the cache breakpoint."""
    changed = list(messages)
    block = TextBlock(text=text)
    if changed and changed[-1].role == "user":
        changed[-1] = Message.model_construct(role="user", content=(*changed[-1].content, block))
    else:
        changed.append(Message(role="user", content=(block,)))
    return changed


def _wire_blocks(item: ItemPayload) -> tuple[Role, tuple[MessageBlock, ...]]:
    if isinstance(item, UserMessage):
        return "user", tuple(item.content)
    if isinstance(item, AssistantMessage):
        return "assistant", tuple(item.content)
    if isinstance(item, ToolResult):
        block = ToolResultBlock(
            tool_use_id=item.tool_use_id, content=item.content, is_error=item.is_error
        )
        return "user", (block,)
    if isinstance(item, SystemMessage):
        return "user", (TextBlock(text=f"<system-message>\n{item.text}\n</system-message>"),)
    if isinstance(item, CompactSummary):
        text = f"<conversation-summary>\n{item.text}\n</conversation-summary>"
        return "user", (TextBlock(text=text),)
    if isinstance(item, TaskEvent):
        return "user", (TextBlock(text=task_event_note(item)),)
    if isinstance(item, Rewind):  # a marker of the log's shape: nothing for the model
        return "user", ()
    raise TypeError(f"unknown item {type(item).__name__}")


def _text_blocks(item: ItemPayload) -> tuple[Role, tuple[MessageBlock, ...]]:
    """`_wire_blocks` for a request without tools: no tool block, each call and result
    as a text block in its place (a result's images stay images, after its text)."""
    if isinstance(item, AssistantMessage):
        return "assistant", tuple(
            TextBlock(text=tool_call_text(block)) if isinstance(block, ToolUseBlock) else block
            for block in item.content
        )
    if isinstance(item, ToolResult):
        images = (
            ()
            if isinstance(item.content, str)
            else tuple(block for block in item.content if isinstance(block, ImageBlock))
        )
        return "user", (TextBlock(text=tool_result_text(item)), *images)
    return _wire_blocks(item)


def tool_call_text(block: ToolUseBlock) -> str:
    """A tool call as the text that stands for it in a request without tools."""
    arguments = json.dumps(block.input, ensure_ascii=False, sort_keys=True)
    return f"[called tool {block.name} with {arguments}]"


def tool_result_text(result: ToolResult) -> str:
    """A tool result as the text that stands for it in a request without tools."""
    if isinstance(result.content, str):
        content = result.content
    else:
        content = "\n".join(b.text for b in result.content if isinstance(b, TextBlock))
    label = "tool error" if result.is_error else "tool result"
    if result.name:
        label = f"{label} ({result.name})"
    return f"[{label}: {content}]"


def task_event_note(event: TaskEvent) -> str:
    """The short note that tells the agent a human changed its task list."""
    if event.op == "TaskCreate":
        subject = subject_line(str(event.input.get("subject", "")))
        change = f"created task {event.taskid}: {subject}"
    else:
        fields = ", ".join(f"{k}={v!r}" for k, v in event.input.items() if k != "taskid")
        change = f"updated task {event.taskid}: {fields}"
    return f"<task-note>A user {change} (via the API).</task-note>"


def unanswered_tool_uses(items: Sequence[ItemPayload]) -> list[ToolUseBlock]:
    """Tool calls of the last assistant message that have no result in the log yet."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, AssistantMessage):
            answered = {
                later.tool_use_id for later in items[index + 1 :] if isinstance(later, ToolResult)
            }
            return [
                block
                for block in item.content
                if isinstance(block, ToolUseBlock) and block.id not in answered
            ]
    return []


def turn_is_answered(items: Sequence[ItemPayload]) -> bool:
    """The last word is the assistant's and it asked for no tool: the turn is over."""
    for item in reversed(items):
        if isinstance(item, AssistantMessage):
            return not any(isinstance(b, ToolUseBlock) for b in item.content)
        if isinstance(item, UserMessage | ToolResult):
            return False
    return False


def task_list_in_view(items: Sequence[ItemPayload]) -> bool:
    """Whether the whole task list is in the request already, after its last user message:
    a compaction's task snapshot, or a successful `TaskList` result. A task reminder then
    would only show the list once more. A user message that directly follows the list
    (a turn's message carried over its compaction's opening) leaves it in view."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, UserMessage):
            return index > 0 and _shows_task_list(items[index - 1])
        if _shows_task_list(item):
            return True
    return False


def _shows_task_list(item: ItemPayload) -> bool:
    if isinstance(item, ToolResult):
        return item.name == "TaskList" and not item.is_error
    return is_task_snapshot(item)
