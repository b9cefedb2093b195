"""Turn projection: one turn of the log split into L2 (conversation) and L3 (everything else).

The seed's layers are complementary, never overlapping: L2 is what the user and the assistant
said to each other, L3 is what L2 left out (tool inputs, tool outputs, system messages,
images). Thinking is stored in neither: the model never sees its old thinking again either,
and memory is a subtraction from that baseline. Noise rules apply to both layers.

Projection is pure and idempotent: every L3 detail carries a source id that is stable across
re-projections (the tool-use id, `<tool_use_id>:result`, the item's key), so a store keyed by
source id can take the same turn twice and change nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, assert_never

from app.domain.files import block_placeholder
from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    DocumentBlock,
    ImageBlock,
    ItemPayload,
    Rewind,
    SystemMessage,
    TaskEvent,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    UserBlock,
    UserMessage,
)
from app.memory.details import is_lookup_output
from app.memory.noise import Boilerplate, CleanedTexts, TextCleaner
from app.memory.render import HEADING as MEMORY_HEADING

__all__ = [
    "IMAGE_PLACEHOLDER",
    "Detail",
    "DetailKind",
    "TurnItem",
    "TurnProjection",
    "project_turn",
    "texts_to_clean",
]

DetailKind = Literal["tool_input", "tool_output", "system", "image"]
IMAGE_PLACEHOLDER = "[image]"  # image data is never stored; its place in the turn is


@dataclass(frozen=True)
class Detail:
    """One L3 record: what L2 left out, under a source id unique within its turn."""

    kind: DetailKind
    source_id: str
    tool_name: str | None
    text: str
    is_error: bool = False  # a tool output of a failed call


@dataclass(frozen=True)
class TurnItem:
    """An item of the turn as the projection needs it.

    `key` is stable per item (its source id, or `item:<seq>`): it names L3 details that have no
    id of their own (system messages, images). `at` must be timezone-aware; it is kept in UTC.
    """

    key: str
    payload: ItemPayload
    at: datetime

    def __post_init__(self) -> None:
        if self.at.tzinfo is None or self.at.utcoffset() is None:
            raise ValueError(f"TurnItem {self.key!r}: `at` must be timezone-aware")
        object.__setattr__(self, "at", self.at.astimezone(UTC))


@dataclass(frozen=True)
class TurnProjection:
    """A turn's L2 (user and assistant text, one turn number for the pair) and its L3."""

    turn: int
    user_text: str
    assistant_text: str
    ended_at: datetime
    details: list[Detail]
    started_at: datetime | None = None  # its first item's time (the prompt's)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _result_text(content: str | list[UserBlock]) -> str:
    """A tool result as text: its text parts in order, an image as the placeholder."""
    if isinstance(content, str):
        return content
    parts = [block.text if isinstance(block, TextBlock) else IMAGE_PLACEHOLDER for block in content]
    return "\n".join(parts)


_BLOCK_HEADING = re.compile(rf"^{re.escape(MEMORY_HEADING)}$", re.MULTILINE)


def _strata_memory(text: str) -> bool:
    """A detail look-up's answer, or the memory block (its heading a line of its own)."""
    return is_lookup_output(text) or _BLOCK_HEADING.search(text) is not None


def _task_line(event: TaskEvent) -> str:
    return f"{event.op} task #{event.taskid} (over REST): {_compact_json(event.input)}"


class _Projector:
    """Collects one turn's L2 parts and L3 details in log order."""

    def __init__(self, boilerplate: Boilerplate | None, cleaner: TextCleaner) -> None:
        self.boilerplate = boilerplate
        self.clean = cleaner
        self.user_parts: list[str] = []
        self.assistant_parts: list[str] = []
        self.details: list[Detail] = []
        self.source_ids: set[str] = set()
        self.last_text_at: datetime | None = None
        self.tool_names: dict[str, str] = {}  # tool_use id -> tool name, for their results
        # the turn's user message, and whether a compaction opened a segment since: a turn
        # compacted before its first answer holds its message again after the opening
        # (`app.engine.compaction.carried_input`), which is the same words, said once
        self.first_user: UserMessage | None = None
        self.compacted = False

    def detail(
        self,
        kind: DetailKind,
        source_id: str,
        tool_name: str | None,
        text: str,
        *,
        is_error: bool = False,
    ) -> None:
        """Add an L3 detail unless it is empty, its source id is already in the turn, or it
        is Strata's own memory handed back (a tool output or system text holding a detail
        look-up's answer or the memory block: the turns it shows are stored already).

        A source id seen twice (a replayed tool call, a transcript posted twice) is the same
        record: the first occurrence wins.
        """
        if not text or source_id in self.source_ids:
            return
        if kind in ("tool_output", "system") and _strata_memory(text):
            return
        self.source_ids.add(source_id)
        self.details.append(Detail(kind, source_id, tool_name, text, is_error))

    def system(self, item: TurnItem, text: str, tool_name: str | None) -> None:
        """A system text, unless the boilerplate memory knows it as a repeat."""
        cleaned = self.clean(text)
        if not cleaned or item.key in self.source_ids:
            return
        if self.boilerplate is not None and self.boilerplate.seen(cleaned, owner=item.key):
            return
        self.detail("system", item.key, tool_name, cleaned)

    def image(self, item: TurnItem, index: int) -> None:
        self.detail("image", f"{item.key}:image:{index}", None, IMAGE_PLACEHOLDER)

    def attached(self, item: TurnItem, index: int, block: ImageBlock | DocumentBlock) -> None:
        """What a user attached: an image as an `image` detail, a document as a `system`
        one, each saying the file (its name, size in pixels or pages, and id); the bytes
        stay in the file store."""
        if block.file is None:
            if isinstance(block, ImageBlock):
                self.image(item, index)
            return
        text = f"{block_placeholder(block)} {block.file.file_id}"
        if isinstance(block, ImageBlock):
            self.detail("image", f"{item.key}:image:{index}", None, text)
        else:
            self.detail("system", f"{item.key}:document:{index}", None, text)

    def add(self, item: TurnItem) -> None:
        payload = item.payload
        if isinstance(payload, UserMessage):
            carried = self.compacted and payload == self.first_user
            self.first_user, self.compacted = self.first_user or payload, False
            if carried:
                return
            for index, user_block in enumerate(payload.content):
                if isinstance(user_block, TextBlock):
                    self.text(self.user_parts, user_block.text)
                else:
                    self.attached(item, index, user_block)
        elif isinstance(payload, AssistantMessage):
            for index, block in enumerate(payload.content):
                if isinstance(block, TextBlock):
                    if self.text(self.assistant_parts, block.text):
                        self.last_text_at = item.at
                elif isinstance(block, ToolUseBlock):
                    self.tool_names[block.id] = block.name
                    self.detail("tool_input", block.id, block.name, _compact_json(block.input))
                elif isinstance(block, ImageBlock):
                    self.image(item, index)
                elif isinstance(block, ThinkingBlock):
                    pass  # dropped everywhere: the model never sees old thinking either
                else:
                    assert_never(block)
        elif isinstance(payload, ToolResult):
            # an imported result has no name of its own: its call, earlier in the turn, has
            name = payload.name or self.tool_names.get(payload.tool_use_id)
            text = self.clean(_result_text(payload.content))
            source_id = f"{payload.tool_use_id}:result"
            self.detail("tool_output", source_id, name, text, is_error=payload.is_error)
        elif isinstance(payload, SystemMessage):
            self.system(item, payload.text, None)
        elif isinstance(payload, CompactSummary):
            self.compacted = True
            self.system(item, payload.text, "compact_summary")
        elif isinstance(payload, TaskEvent):
            # Every task change is a state change worth keeping, never boilerplate.
            self.detail("system", item.key, payload.op, _task_line(payload))
        elif isinstance(payload, Rewind):
            pass  # a marker of the log's shape (the reverted turns are flagged as such)
        else:
            assert_never(payload)

    def text(self, parts: list[str], text: str) -> bool:
        cleaned = self.clean(text)
        if cleaned:
            parts.append(cleaned)
        return bool(cleaned)


def texts_to_clean(payloads: Iterable[ItemPayload]) -> Iterator[str]:
    """The texts `project_turn` cleans of items with these payloads: what a caller cleans
    ahead (`CleanedTexts`) to leave the projection nothing but look-ups."""
    for payload in payloads:
        if isinstance(payload, UserMessage | AssistantMessage):
            yield from (block.text for block in payload.content if isinstance(block, TextBlock))
        elif isinstance(payload, ToolResult):
            yield _result_text(payload.content)
        elif isinstance(payload, SystemMessage | CompactSummary):
            yield payload.text
        elif isinstance(payload, TaskEvent):
            # stored as a system detail, keyed by the fingerprint of its (cleaned) line
            yield _task_line(payload)


def project_turn(
    turn: int,
    items: Sequence[TurnItem],
    boilerplate: Boilerplate | None = None,
    cleaned: CleanedTexts | None = None,
) -> TurnProjection | None:
    """Project a turn's items (in log order) into L2 and L3; None when there are no items.
    `cleaned` holds texts cleaned ahead (`texts_to_clean`); the others are cleaned here.

    The turn's stable time (`ended_at`, what the memory block shows it by) is the time of its
    last assistant item with text: the moment the reply was finished. A turn without one (cut
    off, or tool calls only) ends at its last item. It started (`started_at`) at its first
    item, the prompt: detail look-ups match the span between the two.
    """
    if not items:
        return None
    projector = _Projector(boilerplate, CleanedTexts() if cleaned is None else cleaned)
    for item in items:
        projector.add(item)
    return TurnProjection(
        turn=turn,
        user_text="\n\n".join(projector.user_parts),
        assistant_text="\n\n".join(projector.assistant_parts),
        ended_at=projector.last_text_at or items[-1].at,
        details=projector.details,
        started_at=min(item.at for item in items),
    )
