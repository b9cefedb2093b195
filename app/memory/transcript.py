"""Claude Code transcripts (JSONL) turned into Strata log items: a pure, line-wise import.

Claude Code appends one JSON object per line to `~/.claude/projects/<dir>/<session>.jsonl`.
`parse_transcript` maps those entries onto the item payloads of `app.domain.items`:

- `user` entries: text and image blocks become one `UserMessage` (a string content becomes
  one text block; `isCompactSummary` entries become a `CompactSummary`), and every
  `tool_result` block becomes its own `ToolResult`, emitted before the user message of the
  same entry (the API wants tool results first, and the user message opens a new turn);
- `assistant` entries: one `AssistantMessage` per line. Claude Code writes one content block
  per line and repeats `message.id` and `usage` on each, so the usage goes on the first
  emitted line of a `message.id` only. Older versions (1.0.x, 2.0.x) repeat a *growing*
  `output_tokens` (3, then 263 on the next line), so the usage kept is the field-wise maximum
  over the lines of that `message.id`: for versions that repeat one value it is that value;
  `redacted_thinking` and unknown block types are dropped;
- Claude Code's harness messages written as `user` entries (`isMeta` skill bodies, slash
  command echoes, local command output, task notifications, "[Request interrupted by user]",
  Stop hook feedback, IDE context; see `app.memory.harness`) become `SystemMessage`s, or
  nothing for pure boilerplate: they are not the user's words and open no turn; a slash
  command with arguments is the user's request, a `UserMessage` of the command as typed;
- `attachment` entries (newer Claude Code: hook output, context it injects) become a
  `SystemMessage` with a readable text, except a SessionStart hook's copy of Strata's own
  memory block (the memory of earlier sessions, which Strata holds already);
- what the user typed while Claude worked reaches the transcript only as a queued command:
  a `queued_command` attachment (delivered into the running turn), a `queue-operation`
  `popAll` with content (taken back out of the queue), or a `remove` (Claude Code 2.1.39
  hands the message to the running turn inside a tool result and removes it from the
  queue: the `remove` carries its text, or takes that of the oldest `enqueue` still
  queued); each becomes a `UserMessage` that joins the current turn (`joins_turn`) instead
  of opening one, once: a `remove` whose text a `queued_command` attachment delivers too
  imports nothing. A queued command that is dequeued later arrives as an ordinary `user`
  entry, so `enqueue` itself is not imported;
- every other entry type (`system`, `summary`, `progress`, other `queue-operation`s,
  `file-history-snapshot`, `last-prompt`, ...) is opaque and skipped without a word.

Bad lines (not JSON, not an object, no usable timestamp, malformed message) are reported as
`TranscriptProblem`s and skipped; nothing here raises on data. Text is kept as written
(ANSI escapes, `<system-reminder>` tags): cleaning is the noise rules' job. Thinking blocks
are kept too; the memory projection decides what to drop.

Each line maps to its items on its own, except the usage de-duplication, so parsing a
transcript in chunks split at line boundaries (`first_line` giving the chunk's position)
yields the items of parsing it whole, as long as no split falls between two lines of one
API message (a split there puts that message's usage on the second chunk's first line too).
`ToolResult.name` is left empty for the same reason: the `tool_use` naming it may lie in an
earlier chunk; the caller can fill it in from the `ToolUseBlock` with that id.

Tool call ids (`tool_use.id`, `tool_result.tool_use_id`) go through `api_tool_id`: an id the
Messages API would refuse (a transcript written against another endpoint, or crafted) is
rewritten deterministically, so the log stays valid for later requests and a call still
matches its result.

`source_id`s are stable: the entry `uuid` (a hash of the line when an entry lacks one) and
`<tool_use_id>:result` for tool results. Claude Code rewrites history on some resumes with
new `uuid`s but the original timestamps, `message.id`s and tool ids, so replayed tool results
share a `source_id` with their originals while replayed messages do not; the output is not
de-duplicated here, since idempotent ingestion by `source_id` belongs to the caller.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    ContentBlock,
    ImageBlock,
    ItemPayload,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
)
from app.domain.tool_ids import api_tool_id
from app.domain.usage import Usage
from app.memory.harness import classify
from app.memory.render import HEADING as MEMORY_HEADING

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_JSON_TYPE_NAMES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True)
class ImportedItem:
    source_id: str  # stable id for idempotent ingestion
    payload: ItemPayload
    at: datetime  # entry timestamp, timezone-aware UTC
    sidechain: bool  # isSidechain entries (subagent threads), kept apart by the caller
    agent_id: str | None  # entry "agentId" when present
    joins_turn: bool = False  # a user message typed while Claude worked: no turn of its own


@dataclass(frozen=True)
class TranscriptProblem:
    line: int  # 1-based line number (offset by first_line - 1)
    reason: str  # short, e.g. "not JSON: Expecting value", "no timestamp"


@dataclass(frozen=True)
class ParsedTranscript:
    items: list[ImportedItem]
    problems: list[TranscriptProblem]
    session_id: str | None  # the Claude Code sessionId seen in the entries (first one)
    cwd: str | None


@dataclass(frozen=True)
class TranscriptFacts:
    usage_by_message: dict[str, Usage]  # per API message, the usage its first item carries
    session_id: str | None  # the first Claude Code sessionId seen in the entries
    cwd: str | None  # the first cwd seen
    # per `remove` queue operation (by source id), the text it took out of the queue
    removed: dict[str, str] = dataclasses.field(default_factory=dict)
    # the prompts `queued_command` attachments deliver (a `remove` of one imports nothing)
    delivered: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Entry:
    line: int
    raw: str
    data: dict[str, Any]


class _EntryProblem(Exception):
    """An entry that cannot become items; its message is the problem's reason."""


def parse_transcript(text: str, *, first_line: int = 1) -> ParsedTranscript:
    """Turn Claude Code transcript JSONL into log items, reporting the lines it skipped."""
    lines = text.split("\n")
    facts = transcript_facts(lines)
    items: list[ImportedItem] = []
    problems: list[TranscriptProblem] = []
    for found in iter_transcript(lines, facts, first_line=first_line):
        if isinstance(found, ImportedItem):
            items.append(found)
        else:
            problems.append(found)
    return ParsedTranscript(
        items=items, problems=problems, session_id=facts.session_id, cwd=facts.cwd
    )


def transcript_facts(lines: Iterable[str]) -> TranscriptFacts:
    """What the items of a line depend on beyond the line: the first pass of a streamed
    import, keeping nothing of the lines themselves."""
    usage: dict[str, Usage] = {}
    session_id: str | None = None
    cwd: str | None = None
    queue = _Queue()
    for entry in _entries(lines, 1):
        if isinstance(entry, TranscriptProblem):
            continue
        session_id = session_id or _str_or_none(entry.data.get("sessionId"))
        cwd = cwd or _str_or_none(entry.data.get("cwd"))
        _add_usage(usage, entry)
        queue.follow(entry)
    return TranscriptFacts(usage, session_id, cwd, queue.removed, frozenset(queue.delivered))


@dataclass
class _Queue:
    """Claude Code's queue of messages typed while it worked, replayed from its operations:
    what each `remove` took out, and what `queued_command` attachments delivered."""

    waiting: list[str] = dataclasses.field(default_factory=list)
    removed: dict[str, str] = dataclasses.field(default_factory=dict)
    delivered: set[str] = dataclasses.field(default_factory=set)

    def follow(self, entry: _Entry) -> None:
        data = entry.data
        if data.get("type") == "attachment":
            attachment = data.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "queued_command":
                prompt = attachment.get("prompt")
                if isinstance(prompt, str):
                    self.delivered.add(prompt)
            return
        if data.get("type") != "queue-operation":
            return
        operation, content = data.get("operation"), data.get("content")
        if operation == "enqueue" and isinstance(content, str):
            self.waiting.append(content)
        elif operation == "dequeue" and self.waiting:
            self.waiting.pop(0)
        elif operation == "popAll":
            self.waiting.clear()
        elif operation == "remove":
            if isinstance(content, str):
                if content in self.waiting:
                    self.waiting.remove(content)
            elif self.waiting:
                content = self.waiting.pop(0)
            if isinstance(content, str):
                self.removed[_source_id(entry)] = content


def iter_transcript(
    lines: Iterable[str], facts: TranscriptFacts, *, first_line: int = 1
) -> Iterator[ImportedItem | TranscriptProblem]:
    """The items of the lines and the problems of those skipped, in line order, one line
    at a time (`facts`: `transcript_facts` of the same lines)."""
    usage_claimed: set[str] = set()
    for entry in _entries(lines, first_line):
        if isinstance(entry, TranscriptProblem):
            yield entry
            continue
        kind = entry.data.get("type")
        if kind not in ("user", "assistant", "attachment", "queue-operation"):
            continue
        joins = False
        try:
            at = _timestamp(entry.data)
            if kind == "user":
                payloads, block_problems = _user_payloads(entry)
                yield from (TranscriptProblem(entry.line, p) for p in block_problems)
            elif kind == "assistant":
                payloads = _assistant_payloads(entry, facts.usage_by_message, usage_claimed)
            elif kind == "attachment":
                payloads, joins = _attachment_payloads(entry)
            else:
                payloads, joins = _queued_payloads(entry, facts), True
        except _EntryProblem as exc:
            yield TranscriptProblem(entry.line, str(exc))
            continue
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            yield TranscriptProblem(entry.line, f"malformed {kind} entry: {exc}"[:200])
            continue
        sidechain = entry.data.get("isSidechain") is True
        agent_id = _str_or_none(entry.data.get("agentId"))
        for source_id, payload in payloads:
            yield ImportedItem(source_id, payload, at, sidechain, agent_id, joins)


def _entries(lines: Iterable[str], first_line: int) -> Iterator[_Entry | TranscriptProblem]:
    # Only "\n" ends a line (the caller splits there): str.splitlines would also split
    # on U+2028 and friends, which JSON allows raw inside strings.
    for index, raw in enumerate(lines):
        line_number = first_line + index
        line = raw.rstrip("\r").lstrip("\ufeff")
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield TranscriptProblem(line_number, f"not JSON: {exc.msg}")
            continue
        except RecursionError:
            yield TranscriptProblem(line_number, "not JSON: nested too deeply")
            continue
        if not isinstance(data, dict):
            name = _JSON_TYPE_NAMES.get(type(data), type(data).__name__)
            yield TranscriptProblem(line_number, f"not a JSON object: {name}")
            continue
        yield _Entry(line_number, line, data)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _timestamp(data: dict[str, Any]) -> datetime:
    raw = data.get("timestamp")
    if not isinstance(raw, str) or not raw.strip():
        raise _EntryProblem("no timestamp")
    try:
        at = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise _EntryProblem(f"bad timestamp: {raw[:40]!r}") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _source_id(entry: _Entry) -> str:
    uuid = entry.data.get("uuid")
    if isinstance(uuid, str) and uuid:
        return uuid
    return "sha256:" + hashlib.sha256(entry.raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _message(entry: _Entry) -> dict[str, Any]:
    message = entry.data.get("message")
    if not isinstance(message, dict):
        raise _EntryProblem(f"{entry.data.get('type')} entry without a message")
    return message


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _blank(text: str) -> bool:
    return not text.strip()


def _block_text(block: object) -> str:
    """A content block of a type with no counterpart here, as text."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and isinstance(block.get("text"), str):
        return str(block["text"])
    return _json_text(block)


def _user_block(block: object) -> TextBlock | ImageBlock | None:
    """A text or image block; other types as text; None for blank text."""
    if isinstance(block, dict) and block.get("type") == "image":
        source = block.get("source")
        if isinstance(source, dict):
            return ImageBlock(source=source)
    if isinstance(block, dict) and block.get("type") == "text":
        text = _str_or_none(block.get("text")) or ""
    else:
        text = _block_text(block)
    return None if _blank(text) else TextBlock(text=text)


# --- user entries ---------------------------------------------------------------------


def _user_payloads(entry: _Entry) -> tuple[list[tuple[str, ItemPayload]], list[str]]:
    content = _message(entry).get("content")
    source_id = _source_id(entry)
    if entry.data.get("isCompactSummary") is True:
        if isinstance(content, list):
            content = "\n\n".join(_block_text(block) for block in content)
        if not isinstance(content, str):
            raise _EntryProblem("compact summary without text")
        return ([] if _blank(content) else [(source_id, CompactSummary(text=content))]), []
    is_meta = entry.data.get("isMeta") is True
    if isinstance(content, str):
        if _blank(content):
            return [], []
        if (harness := classify(content, is_meta=is_meta)) is not None:
            if harness.words:  # a slash command's arguments: the user's request
                return [(source_id, UserMessage(content=[TextBlock(text=harness.words)]))], []
            return ([(source_id, SystemMessage(text=harness.text))] if harness.text else []), []
        return [(source_id, UserMessage(content=[TextBlock(text=content)]))], []
    if not isinstance(content, list):
        raise _EntryProblem("user content is neither text nor a list")
    results: list[tuple[str, ItemPayload]] = []
    problems: list[str] = []
    blocks: list[TextBlock | ImageBlock] = []
    harness_texts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            tool_use_id = block.get("tool_use_id")
            if not isinstance(tool_use_id, str) or not tool_use_id:
                problems.append("tool_result without tool_use_id")
                continue
            tool_use_id = api_tool_id(tool_use_id)
            result = ToolResult(
                tool_use_id=tool_use_id,
                content=_tool_result_content(block.get("content")),
                is_error=block.get("is_error") is True,
            )
            results.append((f"{tool_use_id}:result", result))
            continue
        user_block = _user_block(block)
        if isinstance(user_block, TextBlock):
            harness = classify(user_block.text, is_meta=is_meta)
            if harness is not None and harness.words:
                user_block = TextBlock(text=harness.words)
            elif harness is not None:
                harness_texts.extend([harness.text] if harness.text else [])
                continue
        if user_block is not None:
            blocks.append(user_block)
    for index, harness_text in enumerate(harness_texts):
        key = (
            source_id if not blocks and len(harness_texts) == 1 else f"{source_id}:harness:{index}"
        )
        results.append((key, SystemMessage(text=harness_text)))
    if blocks:
        results.append((source_id, UserMessage(content=blocks)))
    return results, problems


def _queued_payloads(entry: _Entry, facts: TranscriptFacts) -> list[tuple[str, ItemPayload]]:
    """A queued command taken back out of the queue (`popAll` with content) or handed to
    the running turn (`remove`): the user's words, typed while Claude worked, that no
    `user` entry will carry (nor, for a `remove`, a `queued_command` attachment)."""
    operation = entry.data.get("operation")
    if operation == "popAll":
        return _typed_words(entry, entry.data.get("content"))
    if operation == "remove":
        text = facts.removed.get(_source_id(entry))
        return [] if text is None or text in facts.delivered else _typed_words(entry, text)
    return []


def _typed_words(entry: _Entry, text: object) -> list[tuple[str, ItemPayload]]:
    if not isinstance(text, str) or _blank(text):
        return []
    if (harness := classify(text)) is not None:
        if not harness.words:
            return []
        text = harness.words
    return [(_source_id(entry), UserMessage(content=[TextBlock(text=text)]))]


def _tool_result_content(content: object) -> str | list[TextBlock | ImageBlock]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks = [_user_block(block) for block in content]
        return [block for block in blocks if block is not None]
    return _json_text(content)


# --- assistant entries ----------------------------------------------------------------


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    counts: dict[str, int] = {}
    for field in _USAGE_FIELDS:
        value = raw.get(field)
        counts[field] = value if _count(value) else 0
    return Usage(**counts)


def _add_usage(found: dict[str, Usage], entry: _Entry) -> None:
    """Per `message.id`, the field-wise maximum of the usage its lines repeat."""
    if entry.data.get("type") != "assistant":
        return
    message = entry.data.get("message")
    if not isinstance(message, dict):
        return
    message_id = message.get("id")
    usage = _usage(message.get("usage"))
    if not isinstance(message_id, str) or not message_id or usage is None:
        return
    seen = found.get(message_id)
    if seen is not None:
        usage = Usage(**{f: max(getattr(seen, f), getattr(usage, f)) for f in _USAGE_FIELDS})
    found[message_id] = usage


def _assistant_block(block: object) -> ContentBlock | None:
    if isinstance(block, str):
        return None if _blank(block) else TextBlock(text=block)
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return TextBlock(text=text) if isinstance(text, str) and not _blank(text) else None
    if kind == "tool_use":
        raw_input = block.get("input")
        if isinstance(raw_input, str):
            try:
                raw_input = json.loads(raw_input)
            except ValueError:
                pass
        tool_input = raw_input if isinstance(raw_input, dict) else {"input": raw_input}
        return ToolUseBlock(
            id=api_tool_id(str(block["id"])), name=str(block["name"]), input=tool_input
        )
    if kind == "thinking":
        thinking = block.get("thinking")
        if not isinstance(thinking, str):
            return None
        return ThinkingBlock(thinking=thinking, signature=_str_or_none(block.get("signature")))
    if kind == "image" and isinstance(block.get("source"), dict):
        return ImageBlock(source=block["source"])
    return None  # redacted_thinking, server tool blocks, unknown types


def _assistant_payloads(
    entry: _Entry, usage_by_message: dict[str, Usage], usage_claimed: set[str]
) -> list[tuple[str, ItemPayload]]:
    message = _message(entry)
    content = message.get("content")
    if isinstance(content, str):
        content = [content]
    if not isinstance(content, list):
        raise _EntryProblem("assistant content is neither text nor a list")
    blocks = [block for block in map(_assistant_block, content) if block is not None]
    if not blocks:
        return []
    message_id = message.get("id")
    if isinstance(message_id, str) and message_id:
        usage = None if message_id in usage_claimed else usage_by_message.get(message_id)
        usage_claimed.add(message_id)
    else:
        usage = _usage(message.get("usage"))
    payload = AssistantMessage(
        content=blocks,
        model=_str_or_none(message.get("model")),
        stop_reason=_str_or_none(message.get("stop_reason")),
        usage=usage,
    )
    return [(_source_id(entry), payload)]


# --- attachment entries ---------------------------------------------------------------


def _attachment_payloads(entry: _Entry) -> tuple[list[tuple[str, ItemPayload]], bool]:
    """(items, whether they join the current turn as the user's words)."""
    attachment = entry.data.get("attachment")
    if not isinstance(attachment, dict):
        raise _EntryProblem("attachment entry without an attachment")
    if attachment.get("type") == "queued_command" and attachment.get("isMeta") is not True:
        typed = _typed_words(entry, attachment.get("prompt"))
        if typed:
            return typed, True
    text = _attachment_text(attachment)
    if attachment.get("hookEvent") == "SessionStart" and MEMORY_HEADING in text:
        return [], False  # Strata's own memory block, handed back
    return [(_source_id(entry), SystemMessage(text=text))], False


def _text_of(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return _json_text(value)


def _attachment_text(attachment: dict[str, Any]) -> str:
    """A readable rendering of a Claude Code `attachment` (hook output and the like)."""
    kind = _str_or_none(attachment.get("type")) or "attachment"
    if kind.startswith("hook_"):
        name = _str_or_none(attachment.get("hookName")) or _str_or_none(attachment.get("hookEvent"))
        lines = [f"{kind}: {name}" if name else kind]
        command = _str_or_none(attachment.get("command"))
        if command:
            lines.append(f"command: {command}")
        exit_code = attachment.get("exitCode")
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            lines.append(f"exit code: {exit_code}")
        tool_use_id = _str_or_none(attachment.get("toolUseID"))
        if tool_use_id:
            lines.append(f"tool use: {tool_use_id}")
        body = _text_of(attachment.get("content"))
        if _blank(body):
            body = _text_of(attachment.get("stdout"))
        if not _blank(body):
            lines.append(body)
        stderr = _text_of(attachment.get("stderr"))
        if not _blank(stderr):
            lines.append(f"stderr: {stderr}")
        return "\n".join(lines)
    rest = {key: value for key, value in attachment.items() if key != "type"}
    body = _text_of(rest.pop("content")) if "content" in rest else ""
    lines = [kind]
    if not _blank(body):
        lines.append(body)
    if rest:
        lines.append(_json_text(rest))
    return "\n".join(lines)
