"""A fake Anthropic Messages API on loopback, for driving the real `anthropic` SDK in tests.

Tests never patch the Anthropic client. They start this server, point
`anthropic.AsyncAnthropic(base_url=fake.url, ...)` (or Strata's settings) at it, and script
what it answers, one step per request, in order:

    fake.enqueue(reply(text("Let me look."), tool_use("read_file", {"path": "a.txt"})))
    fake.enqueue(error(529), reply("Done."))
    ...  # run the code under test
    assert fake.requests[1].body["messages"][-1]["role"] == "user"
    fake.assert_all_consumed()

Steps (builders return small frozen dataclasses):

* `reply(*blocks, ...)`: a message. Streamed as the real SSE event sequence when the request
  has `"stream": true`, otherwise returned as the JSON message object.
* `error(status, ...)`: an error response in Anthropic's error format.
* `raw_sse(text)`: a recorded SSE body served as is (see `load_sse_fixture`).
* `hang(seconds)`: accept the request and do not answer (to trigger client timeouts).
* `respond_with(fn)`: call `fn(request_body)` to choose the step when the request arrives.

Strictness: a request with nothing scripted gets a 500 (with `x-should-retry: false`, so the
SDK fails at once instead of retrying) and is recorded in `unexpected`; so are requests to
other paths and requests the real API would reject (see `validate_request`), which get the
real API's 400 `invalid_request_error` and message (a body over 32 MB its 413
`request_too_large`). `assert_all_consumed()` fails on
unexpected requests and on steps left in the queue.

Tokens: the fake counts a request's tokens with `count_tokens` (characters of the content
the model reads, 4 to a token, plus a few tokens per message and block) and holds the
count against `context_window_tokens` (200,000 unless a test sets another): over it, the
request gets "prompt is too long: N tokens > M maximum", and when the count and
`max_tokens` together exceed it, "input length and `max_tokens` exceed context limit".
A reply without scripted `usage` reports that same count as its `input_tokens`, so a
client that trusts the usage it gets sees exactly the size the fake judges.

Retry timing: the SDK waits `retry-after-ms` (then `retry-after`) before retrying, and falls
back to exponential backoff from 0.5 s when neither gives a positive wait. Error steps
therefore carry `retry-after-ms: 1` unless their `headers` set `retry-after` or
`retry-after-ms` themselves, so retry tests stay fast. (`retry-after: 0` is not positive, so
with it the SDK backs off about 0.5 s.)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import math
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "SSE_FIXTURES_DIR",
    "Block",
    "Dynamic",
    "ErrorReply",
    "FakeMessagesAPI",
    "Hang",
    "RawSSE",
    "RecordedRequest",
    "Reply",
    "Step",
    "Text",
    "ToolUse",
    "UnexpectedRequest",
    "Uploaded",
    "block_tokens",
    "count_tokens",
    "error",
    "hang",
    "load_sse_fixture",
    "raw_sse",
    "reply",
    "respond_with",
    "text",
    "tool_tokens",
    "tool_use",
    "validate_request",
]

SSE_FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic-sse"
"""Recorded SSE bodies from the SDK's own tests (see ATTRIBUTION.md there)."""

MESSAGES_PATH = "/v1/messages"
HELD_POLL_SECONDS = 0.05
"""The slice a held reply waits for its release in (a cancelled wait ends within it)."""
READY_WITHIN = 60.0
"""How long a test waits for the requests it expects: a deadline, never a pause (the wait
ends at the request), long enough for a slow, loaded machine."""
DEFAULT_CONTEXT_WINDOW_TOKENS = 200_000
"""The context window of the models the fake plays (every current Claude model's default)."""
CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 3
"""Tokens the fake adds for each message (its role and framing)."""
BLOCK_TOKENS = 2
"""Tokens the fake adds for each content block and each tool definition."""
IMAGE_TOKENS = 1_600
"""Tokens of one image: about what the real API charges for a ~1.1 megapixel image."""
FAST_RETRY_HEADERS: Mapping[str, str] = {"retry-after-ms": "1"}

_tool_ids = itertools.count(1)


# --------------------------------------------------------------------------- content blocks


@dataclass(frozen=True)
class Text:
    """A text content block."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool_use content block; `id` is filled in by `tool_use()` when not given."""

    name: str
    input: dict[str, Any]
    id: str


Block: TypeAlias = Text | ToolUse


def text(value: str) -> Text:
    return Text(value)


def tool_use(name: str, input: Mapping[str, Any], id: str | None = None) -> ToolUse:
    """A tool_use block. Without `id`, gets the next `toolu_fake_NNNN` (unique per test run),
    readable as `.id` so a test can check the tool_result that comes back."""
    return ToolUse(name=name, input=dict(input), id=id or f"toolu_fake_{next(_tool_ids):04d}")


# --------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Reply:
    """An assistant message; see `reply()`."""

    blocks: tuple[Block, ...]
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Mapping[str, int] | None = None
    delay: float = 0.0
    delay_between_chunks: float = 0.0
    chunk_text: bool = True
    held: threading.Event | None = None

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"

    def usage_for(self, input_tokens: int) -> dict[str, int]:
        """The usage reported: the scripted one, else the request's counted tokens and the
        reply's own."""
        if self.usage is not None:
            return dict(self.usage)
        return {"input_tokens": input_tokens, "output_tokens": max(1, _output_tokens(self))}


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error in Anthropic's error format; see `error()`."""

    status: int
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class RawSSE:
    """A recorded SSE body served verbatim; see `raw_sse()`."""

    text: str
    delay: float = 0.0
    delay_between_chunks: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Accept the request and do not answer for `seconds`; see `hang()`."""

    seconds: float = 30.0


@dataclass(frozen=True)
class Dynamic:
    """Choose the step when the request arrives; see `respond_with()`."""

    fn: Callable[[dict[str, Any]], Step]


Step: TypeAlias = Reply | ErrorReply | RawSSE | Hang | Dynamic


def reply(
    *blocks: Block | str,
    stop_reason: str | None = None,
    stop_sequence: str | None = None,
    usage: Mapping[str, int] | None = None,
    delay: float = 0.0,
    delay_between_chunks: float = 0.0,
    chunk_text: bool = True,
    held: threading.Event | None = None,
) -> Reply:
    """An assistant message made of `blocks` (a plain str is shorthand for `text(str)`).

    `stop_reason` defaults to "tool_use" when a block is a tool_use, else "end_turn".
    `usage` defaults to the request's tokens as `count_tokens` counts them (input) and the
    reply's blocks counted alike (output); a scripted `usage` is reported as given, other
    keys such as `cache_read_input_tokens` / `cache_creation_input_tokens` included.
    `delay` seconds pass before the response starts; `delay_between_chunks` seconds pass
    between SSE events. With `chunk_text`, streamed text is split into deltas of two words.
    With `held`, the response starts only once the test sets that event: the model
    "thinks" exactly as long as the test needs, whatever the machine's speed.
    """
    return Reply(
        blocks=tuple(Text(b) if isinstance(b, str) else b for b in blocks),
        stop_reason=stop_reason,
        stop_sequence=stop_sequence,
        usage=dict(usage) if usage is not None else None,
        delay=delay,
        delay_between_chunks=delay_between_chunks,
        chunk_text=chunk_text,
        held=held,
    )


def error(
    status: int,
    body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    delay: float = 0.0,
) -> ErrorReply:
    """An error response. Without `body`, the usual Anthropic body for `status` (for example
    529 -> overloaded_error "Overloaded"). `headers` are added to the response; unless they
    set `retry-after` or `retry-after-ms`, `retry-after-ms: 1` is added so retries are quick.
    """
    return ErrorReply(
        status=status,
        body=dict(body) if body is not None else None,
        headers=dict(headers) if headers is not None else None,
        delay=delay,
    )


def raw_sse(text: str | bytes, *, delay: float = 0.0, delay_between_chunks: float = 0.0) -> RawSSE:
    """Serve `text` as the text/event-stream body, byte for byte. With
    `delay_between_chunks`, it is sent one event (blank-line separated) at a time."""
    return RawSSE(
        text=text.decode() if isinstance(text, bytes) else text,
        delay=delay,
        delay_between_chunks=delay_between_chunks,
    )


def hang(seconds: float = 30.0) -> Hang:
    """Accept the request and answer nothing for `seconds`. The client is expected to give up
    first (timeout, cancellation); if it is still waiting when the time is up, it gets a 500
    and the request is recorded as unexpected."""
    return Hang(seconds)


def respond_with(fn: Callable[[dict[str, Any]], Step]) -> Dynamic:
    """A step decided at request time: `fn(request_body)` returns the step to serve."""
    return Dynamic(fn)


def load_sse_fixture(name: str) -> str:
    """A recorded SSE body from tests/fixtures/anthropic-sse, e.g. "tool_use_response"
    (the `anthropic-sdk-python__` prefix and `.sse` suffix are optional)."""
    candidates = [name, f"{name}.sse", f"anthropic-sdk-python__{name}.sse"]
    for candidate in candidates:
        path = SSE_FIXTURES_DIR / candidate
        if path.is_file():
            return path.read_bytes().decode()
    raise FileNotFoundError(f"no SSE fixture {name!r} in {SSE_FIXTURES_DIR}")


# ------------------------------------------------------------------------ recorded traffic


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received. `headers` have lower-case names."""

    body: dict[str, Any]
    headers: dict[str, str]
    method: str = "POST"
    path: str = MESSAGES_PATH

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    @property
    def model(self) -> str | None:
        value = self.body.get("model")
        return value if isinstance(value, str) else None

    @property
    def system(self) -> Any:
        return self.body.get("system")

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self.body.get("messages")
        return value if isinstance(value, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        value = self.body.get("tools")
        return value if isinstance(value, list) else []


@dataclass(frozen=True)
class UnexpectedRequest:
    """A request the script did not allow for, and why."""

    reason: str
    request: RecordedRequest

    def __str__(self) -> str:
        return f"{self.request.method} {self.request.path}: {self.reason}"


# ------------------------------------------------------------------------------ validation


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _block_chars(block: Any) -> tuple[int, int]:
    """(characters, extra tokens) the model reads of one content block."""
    if not isinstance(block, dict):
        return 0, BLOCK_TOKENS
    kind = block.get("type")
    if kind == "image":
        return 0, BLOCK_TOKENS + IMAGE_TOKENS
    if kind == "document":
        return 0, BLOCK_TOKENS + _document_tokens(block)
    if kind == "text":
        return len(str(block.get("text", ""))), BLOCK_TOKENS
    if kind == "tool_use":
        return len(str(block.get("name", ""))) + len(_compact(block.get("input", {}))), BLOCK_TOKENS
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, str):
            return len(content), BLOCK_TOKENS
        chars, extra = 0, BLOCK_TOKENS
        for inner in content if isinstance(content, list) else []:
            inner_chars, inner_extra = _block_chars(inner)
            chars, extra = chars + inner_chars, extra + inner_extra
        return chars, extra
    if kind == "thinking":
        return len(str(block.get("thinking", ""))), BLOCK_TOKENS
    return len(_compact(block)), BLOCK_TOKENS


def block_tokens(block: Any) -> int:
    """One content block's tokens as `count_tokens` counts them."""
    chars, extra = _block_chars(block)
    return extra + math.ceil(chars / CHARS_PER_TOKEN)


def tool_tokens(tool: Any) -> int:
    """One tool definition's tokens as `count_tokens` counts them."""
    if not isinstance(tool, dict):
        return BLOCK_TOKENS
    chars = len(str(tool.get("name", ""))) + len(str(tool.get("description", "")))
    chars += len(_compact(tool.get("input_schema", {})))
    return BLOCK_TOKENS + math.ceil(chars / CHARS_PER_TOKEN)


def count_tokens(body: Mapping[str, Any], chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The fake's token count of a request: what it judges against the context window and
    what it reports as `input_tokens` when no usage is scripted.

    A tokenizer counts what the model reads, not the JSON around it: the system prompt,
    the text of each block (a tool call's name and compact JSON input, a tool result's
    text), the tools' names, descriptions and schemas; 4 characters to a token, plus
    `MESSAGE_TOKENS` per message and `BLOCK_TOKENS` per block and tool, and `IMAGE_TOKENS`
    per image. A test may count denser (`chars_per_token` 2: a tokenizer the client's
    4-characters estimate under-counts, as real ones do for code or non-English text).
    """
    chars, tokens = 0, 0
    system = body.get("system")
    if isinstance(system, str):
        chars += len(system)
    elif isinstance(system, list):
        for block in system:
            block_chars, extra = _block_chars(block)
            chars, tokens = chars + block_chars, tokens + extra
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        tokens += MESSAGE_TOKENS
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
            continue
        for block in content if isinstance(content, list) else []:
            block_chars, extra = _block_chars(block)
            chars, tokens = chars + block_chars, tokens + extra
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            tokens += BLOCK_TOKENS
            chars += len(str(tool.get("name", ""))) + len(str(tool.get("description", "")))
            chars += len(_compact(tool.get("input_schema", {})))
    return tokens + math.ceil(chars / chars_per_token)


def _output_tokens(step: Reply) -> int:
    chars = sum(
        len(b.text) if isinstance(b, Text) else len(b.name) + len(_compact(b.input))
        for b in step.blocks
    )
    return math.ceil(chars / CHARS_PER_TOKEN)


def _has_text(blocks: list[Any], types: list[Any]) -> str | None:
    """Why the real API refuses these text blocks (empty, or only whitespace), or None."""
    for block, kind in zip(blocks, types, strict=True):
        if kind != "text":
            continue
        value = block.get("text")
        if not isinstance(value, str) or not value:
            return "messages: text content blocks must be non-empty"
        if not value.strip():
            return "messages: text content blocks must contain non-whitespace text"
    return None


TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _refused_tool_id(index: int, blocks: list[Any], types: list[Any]) -> str | None:
    """Why the real API refuses a tool call id of this message (not `^[a-zA-Z0-9_-]+$`)."""
    for position, (block, kind) in enumerate(zip(blocks, types, strict=True)):
        field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(str(kind))
        if field is None:
            continue
        value = block.get(field)
        if not isinstance(value, str) or TOOL_ID.fullmatch(value) is None:
            return (
                f"messages.{index}.content.{position}.{kind}.{field}: String should match "
                "pattern '^[a-zA-Z0-9_-]+$'"
            )
    return None


MAX_CACHE_BREAKPOINTS = 4
"""Blocks with `cache_control` one request may hold, tools and system blocks included."""


def _cache_breakpoints(value: Any) -> int:
    """How many blocks (tools, system and message blocks, at any depth) carry
    `cache_control`."""
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(_cache_breakpoints(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_cache_breakpoints(item) for item in value)
    return 0


def validate_request(
    body: Mapping[str, Any],
    *,
    context_window_tokens: int | None = None,
    chars_per_token: float = CHARS_PER_TOKEN,
    files: FileSources | None = None,
) -> str | None:
    """The reason the real Messages API would reject `body` with a 400, or None; the
    reasons are the real API's messages. `files`: the Files API uploads the request may
    name and whether it has the beta header; without, a `file` source is refused.

    Checks what it can check cheaply and surely: the required fields; at most 4 blocks
    with `cache_control`; every message has
    content (only a final assistant message may be empty) and no text block is empty; tool
    call ids of the shape `^[a-zA-Z0-9_-]+$`; tool blocks only in a request that defines
    tools; the tool-use pairing rules (every tool_use in an assistant message is answered by
    a tool_result in the next message, tool_result ids match the previous assistant
    message, and tool_result blocks come first in their message); image and document
    blocks as the real API reads them (`_media_problem`); and, given
    `context_window_tokens`, that the prompt (`count_tokens`) fits the window, and so does
    the prompt with `max_tokens` of output.
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required (a positive integer)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    tools = body.get("tools")
    defines_tools = isinstance(tools, list) and bool(tools)
    breakpoints = sum(_cache_breakpoints(body.get(key)) for key in ("tools", "system", "messages"))
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}."
        )

    open_tool_ids: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: Input should be an object"
        role = message.get("role")
        content = message.get("content")
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}] if content else []
        elif isinstance(content, list):
            blocks = content
        else:
            return f"messages.{index}.content: Input should be a string or a list of blocks"
        final_assistant = role == "assistant" and index == len(messages) - 1
        if not blocks and not final_assistant:
            return (
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        types = [b.get("type") if isinstance(b, dict) else None for b in blocks]
        if (problem := _has_text(blocks, types)) is not None:
            return problem
        if (problem := _refused_tool_id(index, blocks, types)) is not None:
            return problem
        if (problem := _media_problem(index, role, blocks, types, files)) is not None:
            return problem
        if not defines_tools and any(t in ("tool_use", "tool_result") for t in types):
            return (
                f"messages.{index}.content: Requests which include `tool_use` or "
                "`tool_result` blocks must define tools."
            )

        if role == "user":
            result_ids = [
                b.get("tool_use_id")
                for b, t in zip(blocks, types, strict=True)
                if t == "tool_result"
            ]
            missing = [i for i in open_tool_ids if i not in result_ids]
            if missing:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
            unknown = [str(i) for i in result_ids if i not in open_tool_ids]
            if unknown:
                return (
                    f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {', '.join(unknown)}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
            if result_ids:
                last_result = max(i for i, t in enumerate(types) if t == "tool_result")
                if any(t != "tool_result" for t in types[:last_result]):
                    return (
                        f"messages.{index}.content: `tool_result` blocks must come first in "
                        "the content array; other blocks must follow all tool results."
                    )
            open_tool_ids = []
        else:
            if open_tool_ids:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(open_tool_ids)}. Each `tool_use` block must "
                    "have a corresponding `tool_result` block in the next message."
                )
            open_tool_ids = [
                str(b.get("id")) for b, t in zip(blocks, types, strict=True) if t == "tool_use"
            ]
    if context_window_tokens is not None:
        tokens = count_tokens(body, chars_per_token)
        if tokens > context_window_tokens:
            return f"prompt is too long: {tokens} tokens > {context_window_tokens} maximum"
        if tokens + max_tokens > context_window_tokens:
            return (
                f"input length and `max_tokens` exceed context limit: {tokens} + {max_tokens} "
                f"> {context_window_tokens}, decrease input length or `max_tokens` and try again"
            )
    return None


# ------------------------------------------------------------------- images and documents

REQUEST_MAX_BYTES = 32 * 1024 * 1024
"""The largest request body the real Messages API takes (32 MB); a larger one is a 413."""
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
IMAGE_MAX_PIXELS = 8000
"""The real API refuses an image over this many pixels on either side."""
PDF_PAGE_TOKENS = 2_000
"""Tokens of one PDF page (its text and its picture) as the fake counts them."""
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def _image_kind(data: bytes) -> str | None:
    """The image type the bytes are, told by their magic bytes (independently of Strata)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _image_dimensions(kind: str, data: bytes) -> tuple[int, int] | None:
    """Width and height from the image's header, or None when it cannot tell."""
    try:
        if kind == "image/png":
            return struct.unpack(">II", data[16:24])
        if kind == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if kind == "image/webp":
            chunk = data[12:16]
            if chunk == b"VP8X":
                return (
                    1 + int.from_bytes(data[24:27], "little"),
                    1 + int.from_bytes(data[27:30], "little"),
                )
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
            if chunk == b"VP8 ":
                width, height = struct.unpack("<HH", data[26:30])
                return width & 0x3FFF, height & 0x3FFF
            return None
        at = 2  # JPEG: walk the segments to a start-of-frame marker
        while at + 9 <= len(data):
            marker = data[at + 1]
            if data[at] != 0xFF:
                return None
            if marker in range(0xD0, 0xDA) or marker == 0x01:
                at += 2
                continue
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[at + 5 : at + 9])
                return width, height
            at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    except struct.error:
        return None
    return None


def _base64_bytes(value: Any) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_problem(at: str, block: Mapping[str, Any]) -> str | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{at}.source: Field required"
    kind = source.get("type")
    if kind == "url":
        return None if isinstance(source.get("url"), str) else f"{at}.source.url: Field required"
    if kind != "base64":
        return f"{at}.source.type: Input should be 'base64' or 'url'"
    media_type = source.get("media_type")
    if media_type not in IMAGE_MEDIA_TYPES:
        return (
            f"{at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
            "'image/gif' or 'image/webp'"
        )
    data = _base64_bytes(source.get("data"))
    if data is None:
        return f"{at}.source.base64.data: The image data is not valid base64."
    actual = _image_kind(data)
    if actual is None:
        return f"{at}.source.base64.data: Could not process image"
    if actual != media_type:
        return f"{at}: Image does not match the provided media type {media_type}"
    size = _image_dimensions(actual, data)
    if size is None:
        return f"{at}.source.base64.data: Could not process image"
    if max(size) > IMAGE_MAX_PIXELS:
        return (
            f"{at}.source.base64.data: At least one of the image dimensions exceed max "
            f"allowed size: {IMAGE_MAX_PIXELS} pixels"
        )
    return None


def _document_problem(at: str, block: Mapping[str, Any]) -> str | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{at}.source: Field required"
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") != "application/pdf":
            return f"{at}.source.base64.media_type: Input should be 'application/pdf'"
        data = _base64_bytes(source.get("data"))
        if data is None:
            return f"{at}.source.base64.data: The PDF data is not valid base64."
        if b"%PDF-" not in data[:1024]:
            return f"{at}.source.base64.data: The PDF specified was not valid."
        return None
    if kind == "text":
        if source.get("media_type") != "text/plain":
            return f"{at}.source.text.media_type: Input should be 'text/plain'"
        if not isinstance(source.get("data"), str):
            return f"{at}.source.text.data: Input should be a valid string"
        return None
    if kind == "url":
        return None if isinstance(source.get("url"), str) else f"{at}.source.url: Field required"
    if kind == "content":
        return (
            None
            if isinstance(source.get("content"), str | list)
            else f"{at}.source.content: Field required"
        )
    return f"{at}.source.type: Input should be 'base64', 'text', 'content' or 'url'"


def _media_problem(
    index: int,
    role: str,
    blocks: list[Any],
    types: list[Any],
    files: FileSources | None = None,
) -> str | None:
    """Why the real API refuses the image and document blocks of one message, or None:
    none in an assistant message; a source of a type it reads, whose media type is one it
    takes and says what the bytes are (valid base64, an image at most 8000 pixels on a
    side, a PDF that is one); the same inside tool results."""
    for position, (block, kind) in enumerate(zip(blocks, types, strict=True)):
        at = f"messages.{index}.content.{position}"
        if kind in ("image", "document") and role == "assistant":
            return (
                f"{at}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags for an assistant message: 'text', 'thinking', "
                "'redacted_thinking', 'tool_use', 'server_tool_use'"
            )
        if kind in ("image", "document") and _is_file_source(block):
            problem = _file_source_problem(at, str(kind), block["source"], files)
        elif kind == "image":
            problem = _image_problem(at, block)
        elif kind == "document":
            problem = _document_problem(at, block)
        elif kind == "tool_result" and isinstance(block.get("content"), list):
            inner = block["content"]
            inner_types = [b.get("type") if isinstance(b, dict) else None for b in inner]
            problem = _media_problem(index, role, inner, inner_types, files)
        else:
            problem = None
        if problem is not None:
            return problem
    return None


FILES_PATH = "/v1/files"
FILES_BETA = "files-api-2025-04-14"
"""The beta a request must name (`anthropic-beta`) to upload files or name them."""
FILE_MAX_BYTES = 500 * 1024 * 1024
"""The largest file the real Files API takes (500 MB)."""
DOCUMENT_FILE_TYPES = ("application/pdf", "text/plain")
"""The types of uploaded file a `document` block reads."""


@dataclass(frozen=True)
class Uploaded:
    """A file uploaded to the fake Files API (`POST /v1/files`)."""

    id: str
    filename: str
    mime_type: str
    data: bytes


@dataclass(frozen=True)
class FileSources:
    """What a request's `file` sources are held against: the uploads the fake issued, and
    whether the request named the Files API beta."""

    uploads: Mapping[str, Uploaded]
    beta: bool


def _is_file_source(block: Mapping[str, Any]) -> bool:
    source = block.get("source")
    return isinstance(source, dict) and source.get("type") == "file"


def _file_source_problem(
    at: str, kind: str, source: Mapping[str, Any], files: FileSources | None
) -> str | None:
    """Why the real API refuses a `file` source: one without the beta is not a source type
    it knows; a file id must be one it issued, of a type the block reads."""
    if files is None or not files.beta:
        known = "'base64' or 'url'" if kind == "image" else "'base64', 'text', 'content' or 'url'"
        return f"{at}.source.type: Input should be {known}"
    file_id = source.get("file_id")
    if not isinstance(file_id, str) or not file_id:
        return f"{at}.source.file.file_id: Field required"
    uploaded = files.uploads.get(file_id)
    if uploaded is None:
        return f"{at}.source.file.file_id: File not found: {file_id}"
    if kind == "image":
        if uploaded.mime_type not in IMAGE_MEDIA_TYPES or _image_kind(uploaded.data) is None:
            return f"{at}: File {file_id} is not a supported image ({uploaded.mime_type})"
        size = _image_dimensions(_image_kind(uploaded.data) or "", uploaded.data)
        if size is None or max(size) > IMAGE_MAX_PIXELS:
            return f"{at}: Could not process image {file_id}"
        return None
    if uploaded.mime_type not in DOCUMENT_FILE_TYPES:
        return f"{at}: File {file_id} of type {uploaded.mime_type} is not supported in a document"
    if uploaded.mime_type == "application/pdf" and b"%PDF-" not in uploaded.data[:1024]:
        return f"{at}: The PDF specified was not valid."
    return None


def _document_tokens(block: Mapping[str, Any]) -> int:
    """A document's tokens as the fake counts them: a PDF's pages, a text's characters."""
    source = block.get("source")
    if not isinstance(source, dict):
        return 0
    if source.get("type") == "text":
        return math.ceil(len(str(source.get("data", ""))) / CHARS_PER_TOKEN)
    data = _base64_bytes(source.get("data"))
    if source.get("type") == "base64" and data is not None:
        return max(1, len(_PDF_PAGE.findall(data))) * PDF_PAGE_TOKENS
    return len(_compact(source)) // CHARS_PER_TOKEN


# ------------------------------------------------------------------------------- encoding

_ERROR_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(
    status: int, message: str | None = None, request_id: str | None = None
) -> dict[str, Any]:
    """Anthropic's error body for `status`."""
    if status in _ERROR_DEFAULTS:
        kind, default_message = _ERROR_DEFAULTS[status]
    elif status >= 500:
        kind, default_message = "api_error", "Internal server error"
    else:
        kind, default_message = "invalid_request_error", "Invalid request"
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": kind, "message": message or default_message},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return body


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sse(event: str, data: Mapping[str, Any]) -> str:
    return f"event: {event}\ndata: {_json(data)}\n\n"


_PING = 'event: ping\ndata: {"type": "ping"}\n\n'
_WORD = re.compile(r"\s*\S+|\s+$")


def _text_chunks(value: str, chunk: bool, words_per_chunk: int = 2) -> list[str]:
    if not value:
        return []
    if not chunk:
        return [value]
    words = _WORD.findall(value)
    chunks = [
        "".join(words[i : i + words_per_chunk]) for i in range(0, len(words), words_per_chunk)
    ]
    return chunks if "".join(chunks) == value else [value]


def _json_pieces(document: str, pieces: int = 3) -> list[str]:
    """Split JSON text into `pieces` parts (at least 2 when possible), never inside an
    escape sequence, so every prefix stays parseable by the SDK's partial-JSON parser."""
    cuts: list[int] = []  # positions between atoms (a char, or a whole escape sequence)
    in_string = False
    position = 0
    while position < len(document):
        char = document[position]
        step = 1
        if in_string and char == "\\":
            step = 6 if document[position + 1 : position + 2] == "u" else 2
        elif char == '"':
            in_string = not in_string
        position += step
        cuts.append(position)
    inner = cuts[:-1]
    if not inner:
        return [document]
    count = min(pieces - 1, len(inner))
    chosen = sorted({inner[(len(inner) * (k + 1)) // (count + 1)] for k in range(count)})
    bounds = [0, *chosen, len(document)]
    return [document[a:b] for a, b in itertools.pairwise(bounds)]


def _block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


def message_json(
    step: Reply, *, message_id: str, model: str, input_tokens: int = 0
) -> dict[str, Any]:
    """The non-streamed JSON message for `step` (`input_tokens`: the request's count)."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(b) for b in step.blocks],
        "stop_reason": step.effective_stop_reason,
        "stop_sequence": step.stop_sequence,
        "usage": step.usage_for(input_tokens),
    }


def sse_events(step: Reply, *, message_id: str, model: str, input_tokens: int = 0) -> list[str]:
    """The SSE events (each a complete "event: ...\\ndata: ...\\n\\n" string) for `step`,
    in the order the real API sends them (`input_tokens`: the request's count)."""
    usage = step.usage_for(input_tokens)
    output_tokens = usage.get("output_tokens", 0)
    start_usage = {**usage, "output_tokens": min(1, output_tokens)}
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    if not step.blocks:
        events.append(_PING)
    for index, block in enumerate(step.blocks):
        if isinstance(block, Text):
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _text_chunks(block.text, step.chunk_text)
            ]
        else:
            start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in ["", *_json_pieces(json.dumps(block.input, ensure_ascii=False))]
            ]
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        if index == 0:
            events.append(_PING)
        events.extend(
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": step.effective_stop_reason,
                    "stop_sequence": step.stop_sequence,
                },
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def _betas(headers: Mapping[str, str]) -> set[str]:
    """The betas an `anthropic-beta` header names (comma-separated)."""
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def _split_sse(body: str) -> list[str]:
    """Split an SSE body after each blank line; the parts join back to `body` exactly."""
    parts = re.split(r"(?<=\n\n)", body)
    return [p for p in parts if p]


# --------------------------------------------------------------------------------- server


class FakeMessagesAPI:
    """A scripted Anthropic Messages API served by uvicorn on 127.0.0.1 (ephemeral port),
    in a daemon thread with its own event loop. Safe to use from the test thread while the
    server thread answers: the queue and the records are guarded by a lock.

    `validate_requests` (default True): requests the real API would reject with a 400 (see
    `validate_request`) get that 400, consume no step, and are recorded as unexpected.
    `context_window_tokens` is the window requests are held against, and `chars_per_token`
    how densely `count_tokens` counts (back to 200,000 and 4 at every `reset`).
    """

    def __init__(self, *, validate_requests: bool = True) -> None:
        self._standing: Callable[[dict[str, Any]], Step] | None = None
        self.validate_requests = validate_requests
        self._default_validate = validate_requests
        self.context_window_tokens = DEFAULT_CONTEXT_WINDOW_TOKENS
        self.chars_per_token: float = CHARS_PER_TOKEN
        self._lock = threading.Lock()
        self._queue: deque[Step] = deque()
        self._requests: list[RecordedRequest] = []
        self._unexpected: list[UnexpectedRequest] = []
        self._exchanges: list[tuple[float, float]] = []
        self._uploads: dict[str, Uploaded] = {}
        self._deleted: set[str] = set()
        self._upload_failures: deque[int] = deque()
        self._upload_ids = itertools.count(1)
        self._generation = 0
        self._message_ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread_error: BaseException | None = None
        self._port: int | None = None
        self.warmups = 0  # `HEAD /` connection warm-ups received (Claude Code sends one)
        self.app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._handle,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                )
            ]
        )

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """Base URL to pass as the SDK's `base_url`, e.g. "http://127.0.0.1:54321"."""
        if self._port is None:
            raise RuntimeError("FakeMessagesAPI is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeMessagesAPI is not started")
        return self._port

    def start(self, timeout: float = 10.0) -> FakeMessagesAPI:
        if self._thread is not None:
            raise RuntimeError("FakeMessagesAPI is already started")
        # IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off
        # (TCP_NODELAY) only on accepted sockets whose `proto` says TCP, and accepted
        # sockets inherit the listener's. With Nagle on, the answer's last small write
        # waits for the client's delayed ACK: ~40 ms per request on a reused connection.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self._port,
            http="h11",
            ws="none",
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            # Longer than the SDK's idle connections live (httpx: 5 s). At uvicorn's
            # default, also 5 s, the fake would close a connection just as the client
            # sends on it (ReadError): about one turn in a thousand of the capacity
            # benchmark, which retries nothing. The real API keeps idle connections far
            # longer.
            timeout_keep_alive=75,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._run, name=f"fake-messages-api-{self._port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._thread_error is not None or not self._thread.is_alive():
                self.stop()
                raise RuntimeError("FakeMessagesAPI failed to start") from self._thread_error
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"FakeMessagesAPI did not start within {timeout} s")
            time.sleep(0.005)
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._stopping = asyncio.Event()
        try:
            assert self._server is not None and self._socket is not None
            loop.run_until_complete(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # reported by start(); never escapes the thread
            self._thread_error = exc
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread. Idempotent."""
        server, thread, loop, stopping = self._server, self._thread, self._loop, self._stopping
        if server is not None:
            server.should_exit = True
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop closed in between
                pass
        if thread is not None:
            thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._loop = self._stopping = self._socket = None

    def server_nodelay(self) -> list[bool]:
        """Whether TCP_NODELAY is on, for the server's side of each open connection.

        For tests of the fake itself: a connection without it answers a reused
        connection ~40 ms late (Nagle + delayed ACK), which every timing taken
        against the fake would include."""
        server = self._server
        if server is None:
            return []
        sockets = [
            conn.transport.get_extra_info("socket")
            for conn in list(server.server_state.connections)
            if getattr(conn, "transport", None) is not None
        ]
        return [
            bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            for sock in sockets
            if sock is not None
        ]

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------- scripting

    def enqueue(self, *steps: Step) -> None:
        """Append steps to the FIFO script; each request consumes the next one."""
        with self._lock:
            self._queue.extend(steps)

    def reply(
        self,
        *blocks: Block | str,
        stop_reason: str | None = None,
        stop_sequence: str | None = None,
        usage: Mapping[str, int] | None = None,
        delay: float = 0.0,
        delay_between_chunks: float = 0.0,
        chunk_text: bool = True,
        held: threading.Event | None = None,
    ) -> Reply:
        """Enqueue `reply(...)` and return the step."""
        step = reply(
            *blocks,
            stop_reason=stop_reason,
            stop_sequence=stop_sequence,
            usage=usage,
            delay=delay,
            delay_between_chunks=delay_between_chunks,
            chunk_text=chunk_text,
            held=held,
        )
        self.enqueue(step)
        return step

    def error(
        self,
        status: int,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        delay: float = 0.0,
    ) -> ErrorReply:
        """Enqueue `error(...)` and return the step."""
        step = error(status, body, headers, delay=delay)
        self.enqueue(step)
        return step

    def raw_sse(
        self, text: str | bytes, *, delay: float = 0.0, delay_between_chunks: float = 0.0
    ) -> RawSSE:
        """Enqueue `raw_sse(...)` and return the step."""
        step = raw_sse(text, delay=delay, delay_between_chunks=delay_between_chunks)
        self.enqueue(step)
        return step

    def hang(self, seconds: float = 30.0) -> Hang:
        """Enqueue `hang(...)` and return the step."""
        step = hang(seconds)
        self.enqueue(step)
        return step

    def respond_with(self, fn: Callable[[dict[str, Any]], Step]) -> Dynamic:
        """Enqueue `respond_with(...)` and return the step."""
        step = respond_with(fn)
        self.enqueue(step)
        return step

    def always(self, fn: Callable[[dict[str, Any]], Step]) -> None:
        """Answer every request the script does not cover with `fn(request_body)`: for
        load-like tests where the number of requests is not known in advance."""
        with self._lock:
            self._standing = fn

    def fail_uploads(self, *statuses: int) -> None:
        """Answer the next `POST /v1/files` requests with these error statuses, in order."""
        with self._lock:
            self._upload_failures.extend(statuses)

    def delete_upload(self, file_id: str) -> None:
        """Forget an uploaded file, as a delete through the real Files API does: a request
        naming it is refused from now on (it stays in `uploads`)."""
        with self._lock:
            self._deleted.add(file_id)

    @property
    def uploads(self) -> list[Uploaded]:
        """The files uploaded (`POST /v1/files`) since the last reset, oldest first."""
        with self._lock:
            return list(self._uploads.values())

    def reset(self) -> None:
        """Forget the script, the records, the uploaded files and the id counters;
        re-enable validation and restore the default context window."""
        with self._lock:
            self._standing = None
            self._queue.clear()
            self._requests.clear()
            self._unexpected.clear()
            self._exchanges.clear()
            self._uploads.clear()
            self._deleted.clear()
            self._upload_failures.clear()
            self._upload_ids = itertools.count(1)
            self._generation += 1
            self._message_ids = itertools.count(1)
            self._request_ids = itertools.count(1)
            self.warmups = 0
            self.validate_requests = self._default_validate
            self.context_window_tokens = DEFAULT_CONTEXT_WINDOW_TOKENS
            self.chars_per_token = CHARS_PER_TOKEN

    # ------------------------------------------------------------------- inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received since the last reset, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def unexpected(self) -> list[UnexpectedRequest]:
        """Requests the script did not allow for (a copy)."""
        with self._lock:
            return list(self._unexpected)

    @property
    def pending(self) -> list[Step]:
        """Steps not consumed yet (a copy)."""
        with self._lock:
            return list(self._queue)

    def discard_pending(self) -> list[Step]:
        """Drop the steps not consumed yet, and return them: for a run that may end before
        its request is made, such as an interrupt racing a turn's first request."""
        with self._lock:
            pending = list(self._queue)
            self._queue.clear()
        return pending

    def assert_all_consumed(self) -> None:
        """Raise AssertionError if a step is left unconsumed or a request was unexpected."""
        with self._lock:
            pending = list(self._queue)
            unexpected = list(self._unexpected)
        problems: list[str] = []
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected request(s):")
            problems.extend(f"  - {u}" for u in unexpected)
        if pending:
            problems.append(f"{len(pending)} scripted step(s) never requested:")
            problems.extend(f"  - {s!r}" for s in pending)
        if problems:
            raise AssertionError("FakeMessagesAPI: " + "\n".join(problems))

    def take_exchanges(self) -> list[tuple[float, float]]:
        """(request arrived, answer written) of each answered request since the last
        call, in `time.perf_counter()` seconds of the server's process, and forget them.

        For benchmarks: the gap between an answer written and the next request arrived
        is the client's own work between two LLM calls, seen from outside the client."""
        with self._lock:
            taken, self._exchanges = self._exchanges, []
        return taken

    def _answered(self, arrived: float) -> None:
        with self._lock:
            self._exchanges.append((arrived, time.perf_counter()))

    async def wait_for_requests(
        self, count: int, within: float = READY_WITHIN
    ) -> list[RecordedRequest]:
        """Wait (without blocking the event loop) until `count` requests have arrived."""
        deadline = time.monotonic() + within
        while True:
            recorded = self.requests
            if len(recorded) >= count:
                return recorded
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"FakeMessagesAPI: {len(recorded)} request(s) after {within} s, "
                    f"expected {count}"
                )
            await asyncio.sleep(0.005)

    # ---------------------------------------------------------------------- serving

    async def _handle(self, request: Request) -> Response:
        if request.method == "HEAD" and request.url.path == "/":
            # Claude Code warms its connection up with `HEAD <base URL>` at start and ignores
            # the answer: no API call, so neither a scripted request nor an unexpected one
            with self._lock:
                self.warmups += 1
            return Response(status_code=200)
        if request.url.path == FILES_PATH and request.method == "POST":
            return await self._upload(request)
        arrived = time.perf_counter()
        raw = await request.body()
        too_large = len(raw) > REQUEST_MAX_BYTES
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            parsed: Any = json.loads(raw) if raw else {}
        except ValueError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        recorded = RecordedRequest(
            body=body, headers=headers, method=request.method, path=request.url.path
        )
        with self._lock:
            generation = self._generation
            self._requests.append(recorded)
            request_id = f"req_fake_{next(self._request_ids):04d}"
            validate = self.validate_requests
            window = self.context_window_tokens
            density = self.chars_per_token
            live = {k: v for k, v in self._uploads.items() if k not in self._deleted}
            sources = FileSources(live, FILES_BETA in _betas(headers))

        def reject(status: int, reason: str, *, real: bool = False) -> Response:
            """Record the request as unexpected and answer `status`: with the real API's
            message (`real`) or one that says the fake refused it."""
            with self._lock:
                if generation == self._generation:
                    self._unexpected.append(UnexpectedRequest(reason, recorded))
            message = reason if real else f"fake Messages API: {reason}"
            return self._error_response(
                status,
                error_body(status, message, request_id),
                {"x-should-retry": "false"},
                request_id,
            )

        if request.method != "POST" or request.url.path != MESSAGES_PATH:
            return reject(404, f"only POST {MESSAGES_PATH} is served")
        if validate and too_large:
            return reject(413, _ERROR_DEFAULTS[413][1], real=True)
        if not isinstance(parsed, dict):
            return reject(400, "the request body is not a JSON object")
        if validate:
            problem = validate_request(
                body, context_window_tokens=window, chars_per_token=density, files=sources
            )
            if problem is not None:
                return reject(400, problem, real=True)

        with self._lock:
            step = self._queue.popleft() if self._queue else None
            if step is None and self._standing is not None:
                step = Dynamic(self._standing)
            message_id = f"msg_fake_{next(self._message_ids):04d}"
        if step is None:
            return reject(500, "no scripted response left for this request")
        for _ in range(10):
            if not isinstance(step, Dynamic):
                break
            try:
                step = step.fn(body)
            except Exception as exc:
                return reject(500, f"respond_with callable raised {exc!r}")
        if isinstance(step, Dynamic):
            return reject(500, "respond_with callables nested too deeply")

        model = body.get("model") if isinstance(body.get("model"), str) else "claude-fake"
        assert isinstance(model, str)

        if isinstance(step, Hang):
            if await self._pause(request, step.seconds):
                return reject(500, f"hang({step.seconds}) ran out and the client still waited")
            return Response(status_code=499)
        if not await self._pause(request, step.delay, getattr(step, "held", None)):
            return Response(status_code=499)
        if isinstance(step, ErrorReply):
            body_out = (
                dict(step.body)
                if step.body is not None
                else error_body(step.status, request_id=request_id)
            )
            extra = dict(step.headers or {})
            if not {k.lower() for k in extra} & {"retry-after", "retry-after-ms"}:
                extra = {**FAST_RETRY_HEADERS, **extra}
            return self._error_response(step.status, body_out, extra, request_id)
        if isinstance(step, RawSSE):
            return self._stream(
                _split_sse(step.text), step.delay_between_chunks, request_id, arrived
            )
        input_tokens = count_tokens(body, density)
        if recorded.stream:
            events = sse_events(step, message_id=message_id, model=model, input_tokens=input_tokens)
            return self._stream(events, step.delay_between_chunks, request_id, arrived)
        self._answered(arrived)  # not quite written yet: only benchmarks read this
        return Response(
            _json(
                message_json(step, message_id=message_id, model=model, input_tokens=input_tokens)
            ),
            media_type="application/json",
            headers={"request-id": request_id},
        )

    async def _upload(self, request: Request) -> Response:
        """`POST /v1/files`, as the real Files API: the beta header, a multipart form with
        a non-empty `file` of at most 500 MB; answers the file's metadata."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            request_id = f"req_fake_{next(self._request_ids):04d}"
            failure = self._upload_failures.popleft() if self._upload_failures else None

        def refuse(status: int, message: str | None = None) -> Response:
            extra = {"x-should-retry": "false"} if status < 500 else dict(FAST_RETRY_HEADERS)
            body = error_body(status, message, request_id)
            return self._error_response(status, body, extra, request_id)

        if FILES_BETA not in _betas(headers):
            return refuse(400, f"The Files API requires the beta header {FILES_BETA}")
        if failure is not None:
            return refuse(failure)
        if int(headers.get("content-length", "0") or 0) > FILE_MAX_BYTES + 1024 * 1024:
            return refuse(413, "File exceeds the maximum allowed size of 500 MB.")
        async with request.form(max_part_size=FILE_MAX_BYTES + 1) as form:
            part = form.get("file")
            if part is None or isinstance(part, str):
                return refuse(400, "file: Field required")
            data = await part.read()
            filename, content_type = part.filename, part.content_type
        if not data:
            return refuse(400, "file: The file is empty")
        if len(data) > FILE_MAX_BYTES:
            return refuse(413, "File exceeds the maximum allowed size of 500 MB.")
        mime_type = (content_type or "application/octet-stream").split(";")[0].strip()
        with self._lock:
            file_id = f"file_fake{next(self._upload_ids):06d}"
            uploaded = Uploaded(file_id, filename or "file", mime_type, data)
            self._uploads[file_id] = uploaded
        body = {
            "id": file_id,
            "type": "file",
            "filename": uploaded.filename,
            "mime_type": mime_type,
            "size_bytes": len(data),
            "created_at": "2026-01-01T00:00:00Z",
            "downloadable": False,
        }
        return Response(
            _json(body), media_type="application/json", headers={"request-id": request_id}
        )

    @staticmethod
    def _error_response(
        status: int, body: Mapping[str, Any], headers: Mapping[str, str], request_id: str
    ) -> Response:
        return Response(
            _json(body),
            status_code=status,
            media_type="application/json",
            headers={"request-id": request_id, "x-fake-messages-api": "1", **headers},
        )

    def _stream(
        self, chunks: Iterable[str], gap: float, request_id: str, arrived: float
    ) -> StreamingResponse:
        parts = list(chunks)

        async def body() -> AsyncIterator[bytes]:
            for index, part in enumerate(parts):
                if index and gap > 0:
                    await asyncio.sleep(gap)
                yield part.encode()
            # asked for more after the last part was handed to the transport: written
            self._answered(arrived)

        return StreamingResponse(
            body(),
            media_type="text/event-stream; charset=utf-8",
            headers={"request-id": request_id, "cache-control": "no-cache"},
        )

    async def _pause(
        self, request: Request, seconds: float, held: threading.Event | None = None
    ) -> bool:
        """Sleep `seconds`, then until `held` is set; False if the client disconnected or
        the server stops first."""
        if seconds <= 0 and held is None:
            return True

        async def sleep() -> None:
            await asyncio.sleep(seconds)
            # the test sets a thread's event: wait for it in short slices, so a stop or
            # a disconnect cancels the wait in time
            while held is not None and not await asyncio.to_thread(held.wait, HELD_POLL_SECONDS):
                pass

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        sleeper = asyncio.ensure_future(sleep())
        watchers: list[asyncio.Future[Any]] = [asyncio.ensure_future(disconnected())]
        if self._stopping is not None:
            watchers.append(asyncio.ensure_future(self._stopping.wait()))
        tasks = {sleeper, *watchers}
        done: set[asyncio.Future[Any]] = set()
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return sleeper in done and not any(w in done for w in watchers)
