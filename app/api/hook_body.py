"""A hook body read once and held once, its transcript decoded a block at a time.

`POST /hooks/claude-code` carries whole transcripts (up to `STRATA_HOOK_MAX_BODY_BYTES`)
as one JSON string, `transcript`. Decoding the body as FastAPI does would hold it
several times over (the received chunks, the joined body, the decoded string, its
lines, every entry decoded) before anything is imported. Here the body is received
into one buffer, counted against the process's hook body budget as it arrives; the
members other than `transcript` are decoded and validated as a body of their own
(`transcript` as null), and the transcript's string literal is left in the buffer
and decoded into lines a block at a time, each time the import reads it. What is
held besides the body is a block and the lines of one chunk of the import.

The body's other members are checked as `StrictJSONMiddleware` checks every other JSON
body (which passes this path by); the transcript's entries are the import's to judge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from app.api.strict_json import NonFiniteNumber, non_finite_problem
from app.services.limits import BodyClaim

M = TypeVar("M", bound=BaseModel)

TRANSCRIPT = b"transcript"
# The transcript is decoded this many bytes of its literal at a time: large enough that
# the per-block work is nothing beside the decoding, small beside any body worth
# streaming (not a knob: what it bounds is a few hundred kilobytes).
BLOCK_BYTES = 256 * 1024

_WS = re.compile(rb"[ \t\n\r]*")
# possessive: a transcript literal of 50 MB is matched in one pass, without a
# backtracking stack that grows with every escape in it
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_NESTING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[{}\[\]]', re.DOTALL)
_SCALAR = re.compile(rb"[^,}\]\s]+")
_BACKSLASH, _U = 0x5C, 0x75


async def read_body(request: Request, claim: BodyClaim) -> bytearray:
    """The whole body in one buffer; the claim holds its declared length before a byte is
    read, and grows with what arrives beyond it (a chunked body)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        claim.grow_to(int(declared))
    body = bytearray()
    async for chunk in request.stream():
        claim.grow_to(len(body) + len(chunk))
        body += chunk
    return body


def parse_hook(body: bytearray, model: type[M]) -> tuple[M, tuple[int, int] | None]:
    """The hook payload without its transcript, and where the transcript's string
    literal lies in `body` (between its quotes), when it is a string. Errors are those
    FastAPI gives for a body it parses (422 `json_invalid`, the model's own)."""
    span = _transcript_span(body)
    if span is None:
        rest = bytes(body)
    else:
        start, end = span
        rest = bytes(body[: start - 1]) + b"null" + bytes(body[end + 1 :])
    if not rest.strip():
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
        )
    data = _decode_json(rest)
    if (problem := non_finite_problem(rest)) is not None:
        raise NonFiniteNumber(problem)
    try:
        hook = model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None
    return hook, span


def literal_lines(
    body: bytearray, start: int, end: int, *, block: int | None = None
) -> Iterator[str]:
    """The lines (split at "\\n" only, as `str.split` would) of the JSON string literal
    `body[start:end]`, decoded `block` bytes (default `BLOCK_BYTES`) at a time. A block
    that is not valid JSON string content raises `RequestValidationError` (422
    `json_invalid`)."""
    block = block or BLOCK_BYTES
    parts: list[str] = []
    position = start
    while position < end:
        cut = _cut(body, position, min(end, position + block), end)
        text = _decode_literal(body, position, cut)
        *whole, last = text.split("\n")
        if whole:
            parts.append(whole[0])
            yield "".join(parts)
            yield from whole[1:]
            parts = []
        parts.append(last)
        position = cut
    yield "".join(parts)


def _transcript_span(body: bytearray) -> tuple[int, int] | None:
    """Where the last top-level `transcript` member's string value lies, without its
    quotes; None when there is none, it is no string, or the body is no JSON object
    (then the whole body is decoded, and its errors reported, as FastAPI would)."""
    position = _skip_ws(body, 0)
    if body[position : position + 1] != b"{":
        return None
    position = _skip_ws(body, position + 1)
    span = None
    if body[position : position + 1] == b"}":
        return None
    while True:
        key = _STRING.match(body, position)
        if key is None:
            return None
        is_transcript = body[key.start() + 1 : key.end() - 1] == TRANSCRIPT
        position = _skip_ws(body, key.end())
        if body[position : position + 1] != b":":
            return None
        position = _skip_ws(body, position + 1)
        value_end = _value_end(body, position)
        if value_end is None:
            return None
        if is_transcript:
            is_string = body[position : position + 1] == b'"'
            span = (position + 1, value_end - 1) if is_string else None
        position = _skip_ws(body, value_end)
        separator = body[position : position + 1]
        if separator == b"}":
            return span
        if separator != b",":
            return None
        position = _skip_ws(body, position + 1)


def _skip_ws(body: bytearray, position: int) -> int:
    match = _WS.match(body, position)
    return match.end() if match else position


def _value_end(body: bytearray, position: int) -> int | None:
    """The end of the JSON value at `position` (found, not checked: the decoding of the
    body without the transcript checks it)."""
    first = bytes(body[position : position + 1])
    if first == b'"':
        string = _STRING.match(body, position)
        return string.end() if string else None
    if first in (b"{", b"["):
        depth = 0
        for token in _NESTING.finditer(body, position):
            opening = body[token.start()]
            if opening in b"{[":
                depth += 1
            elif opening in b"}]":
                depth -= 1
                if depth == 0:
                    return token.end()
        return None
    scalar = _SCALAR.match(body, position)
    return scalar.end() if scalar else None


def _escaping(body: bytearray, low: int, position: int) -> bool:
    """Whether the backslash at `position` starts an escape (an even run before it)."""
    run = 0
    while position - run > low and body[position - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 0


def _cut(body: bytearray, low: int, cut: int, end: int) -> int:
    """A place at or before `cut` (after `low`) to end a block of the literal that splits
    no UTF-8 character, no escape and no surrogate pair written as two escapes."""
    if cut >= end:
        return end
    tentative = cut
    while True:
        moved = cut
        while cut > low and body[cut] & 0xC0 == 0x80:  # inside a UTF-8 character
            cut -= 1
        for at in range(max(low, cut - 6), cut):
            if body[at] != _BACKSLASH or not _escaping(body, low, at):
                continue
            if body[at + 1] != _U:
                split = at + 2 > cut  # a two-character escape split
            else:  # inside a \u escape, or a high surrogate whose low half follows
                split = at + 6 > cut or _high_surrogate(body, at)
            if split:
                cut = at
                break
        if cut == moved:
            break
    if cut <= low:  # a block too small for what starts it: take a little more
        return _cut(body, low, min(end, tentative + 12), end)
    return cut


def _high_surrogate(body: bytearray, at: int) -> bool:
    digits = bytes(body[at + 2 : at + 6]).lower()
    return len(digits) == 4 and b"d800" <= digits <= b"dbff"


def _decode_literal(body: bytearray, start: int, end: int) -> str:
    try:
        text = json.loads(b'"' + bytes(body[start:end]) + b'"')
    except json.JSONDecodeError as exc:
        raise _json_invalid(exc.msg, start + max(0, exc.pos - 1)) from None
    except ValueError as exc:  # not UTF-8
        raise _json_invalid(str(exc), start) from None
    assert isinstance(text, str)
    return text


def _decode_json(rest: bytes) -> Any:
    try:
        return json.loads(rest)
    except json.JSONDecodeError as exc:
        raise _json_invalid(exc.msg, exc.pos) from None
    except (ValueError, RecursionError) as exc:
        raise _json_invalid(type(exc).__name__, None) from None


def _json_invalid(reason: str, position: int | None) -> RequestValidationError:
    loc = ("body",) if position is None else ("body", position)
    return RequestValidationError(
        [
            {
                "type": "json_invalid",
                "loc": loc,
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": reason},
            }
        ]
    )
