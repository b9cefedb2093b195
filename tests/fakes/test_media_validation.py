"""The fake Messages API refuses image and document blocks as the real API does."""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import pytest

from tests.fakes import media
from tests.fakes.messages_api import REQUEST_MAX_BYTES, FakeMessagesAPI, validate_request

MODEL = "claude-fake"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _image(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": _b64(data)},
    }


def _pdf(data: bytes, media_type: str = "application/pdf") -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": media_type, "data": _b64(data)},
    }


def _problem(*blocks: dict[str, Any], role: str = "user") -> str | None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    if role == "assistant":
        messages.append({"role": "assistant", "content": list(blocks)})
    else:
        messages[0]["content"] = [*messages[0]["content"], *blocks]
    return validate_request({"model": MODEL, "max_tokens": 32, "messages": messages})


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (media.png(), "image/png"),
        (media.jpeg(), "image/jpeg"),
        (media.gif(), "image/gif"),
        (media.webp(), "image/webp"),
    ],
)
def test_the_fake_accepts_an_image_of_each_type_it_reads(data: bytes, media_type: str) -> None:
    assert _problem(_image(data, media_type)) is None


def test_the_fake_refuses_an_image_media_type_the_api_does_not_take() -> None:
    problem = _problem(_image(media.png(), "image/svg+xml"))

    assert problem is not None and "media_type" in problem


def test_the_fake_refuses_an_image_whose_bytes_are_another_type() -> None:
    problem = _problem(_image(media.jpeg(), "image/png"))

    assert problem is not None and "does not match the provided media type" in problem


def test_the_fake_refuses_image_data_that_is_not_base64() -> None:
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "*!"}}

    problem = _problem(block)

    assert problem is not None and "base64" in problem


def test_the_fake_refuses_an_image_over_8000_pixels_on_a_side() -> None:
    problem = _problem(_image(media.png(8001, 2)))

    assert problem is not None and "8000 pixels" in problem


def test_the_fake_accepts_a_pdf_and_a_text_document() -> None:
    text = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}

    assert _problem(_pdf(media.pdf(2)), text) is None


def test_the_fake_refuses_a_document_that_is_not_pdf_or_text() -> None:
    assert _problem(_pdf(media.png(), "image/png")) is not None
    assert _problem(_pdf(media.png())) is not None  # declared a PDF, is not one
    markdown = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/markdown", "data": "# x"},
    }
    assert _problem(markdown) is not None


@pytest.mark.parametrize("kind", ["image", "document"])
def test_the_fake_refuses_an_image_or_document_in_an_assistant_message(kind: str) -> None:
    block = _image(media.png()) if kind == "image" else _pdf(media.pdf())

    problem = _problem(block, role="assistant")

    assert problem is not None and f"'{kind}'" in problem


def test_the_fake_checks_images_inside_tool_results() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "see", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [_image(media.png(), "image/gif")],
                }
            ],
        },
    ]
    tools = [{"name": "see", "description": "d", "input_schema": {"type": "object"}}]

    problem = validate_request(
        {"model": MODEL, "max_tokens": 32, "messages": messages, "tools": tools}
    )

    assert problem is not None and "media type" in problem


async def test_the_fake_refuses_a_request_over_32_mb_with_a_413(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply("unused")
    big = "x" * (REQUEST_MAX_BYTES + 1)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake_llm.url, max_retries=0)
    try:
        with pytest.raises(anthropic.APIStatusError) as raised:
            await client.messages.create(
                model=MODEL, max_tokens=32, messages=[{"role": "user", "content": big}]
            )
    finally:
        await client.close()

    assert raised.value.status_code == 413
    fake_llm.reset()
