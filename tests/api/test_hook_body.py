"""A hook body's transcript literal found in the raw body and decoded a block at a time."""

from __future__ import annotations

import json
import random

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict

from app.api.hook_body import literal_lines, parse_hook


class Hook(BaseModel):
    model_config = ConfigDict(extra="allow")

    session_id: str
    transcript: str | None = None


def body_of(payload: object, *, ensure_ascii: bool = True) -> bytearray:
    return bytearray(json.dumps(payload, ensure_ascii=ensure_ascii).encode("utf-8"))


def lines_of(body: bytearray, span: tuple[int, int] | None, block: int) -> list[str]:
    assert span is not None
    return list(literal_lines(body, *span, block=block))


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 13, 64])
def test_lines_decoded_in_blocks_equal_the_whole_string_split_at_newlines(block: int) -> None:
    pieces = ["a", "\\", '"', "\n", "\r\n", "é", "😀", "\u2028", "\x01", "u", "/", "\t", "\ud83d"]
    rnd = random.Random(block)
    for _ in range(300):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        escaped = rnd.random() < 0.5 or "\ud83d" in text  # a lone surrogate is no UTF-8
        body = body_of({"transcript": text, "session_id": "s"}, ensure_ascii=escaped)

        hook, span = parse_hook(body, Hook)

        assert hook.transcript is None
        assert lines_of(body, span, block) == text.split("\n")


def test_the_other_members_are_read_whatever_their_order_and_nesting() -> None:
    payload = {
        "a": {"transcript": "inner", "b": [1, {"c": "}]"}]},
        "transcript": "x\ny",
        "session_id": "s-1",
        "n": -1.5e3,
    }
    body = body_of(payload)

    hook, span = parse_hook(body, Hook)

    assert hook.model_dump() == {**payload, "transcript": None}
    assert lines_of(body, span, 1024) == ["x", "y"]


def test_the_last_of_two_transcript_members_is_the_one_read() -> None:
    body = bytearray(b'{"session_id": "s", "transcript": "first", "transcript": "last"}')

    _, span = parse_hook(body, Hook)

    assert lines_of(body, span, 1024) == ["last"]


@pytest.mark.parametrize(
    "raw",
    [b'{"session_id": "s", "transcript": "a\x01b"}', b'{"session_id": "s", "transcript": "\\x"}'],
)
def test_a_transcript_that_is_no_json_string_is_json_invalid(raw: bytes) -> None:
    body = bytearray(raw)
    _, span = parse_hook(body, Hook)

    with pytest.raises(RequestValidationError) as invalid:
        lines_of(body, span, 1024)

    assert invalid.value.errors()[0]["type"] == "json_invalid"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"session_id": "s", "transcript": "a"', "json_invalid"),
        (b"", "missing"),
        (b'{"transcript": "a"}', "missing"),
        (b'{"session_id": "s", "transcript": 5}', "string_type"),
        (b"[1]", "model_type"),
    ],
)
def test_a_malformed_body_is_refused_as_fastapi_would(raw: bytes, kind: str) -> None:
    with pytest.raises(RequestValidationError) as invalid:
        parse_hook(bytearray(raw), Hook)

    assert invalid.value.errors()[0]["type"] == kind
    assert invalid.value.errors()[0]["loc"][0] == "body"
