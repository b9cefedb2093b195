"""The fake's Files API: `POST /v1/files` as the real one takes it, and `file` sources in
messages only for ids it issued and only with the beta header."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from app.engine.llm import FILES_API_BETA
from tests.fakes import media
from tests.fakes.messages_api import FakeMessagesAPI

MODEL = "claude-sonnet-4-5"


def _client(fake: FakeMessagesAPI) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="test", base_url=fake.url, max_retries=0)


async def _upload(fake: FakeMessagesAPI, data: bytes, name: str, media_type: str) -> str:
    async with _client(fake) as client:
        uploaded = await client.beta.files.upload(
            file=(name, data, media_type), betas=[FILES_API_BETA]
        )
    return uploaded.id


async def _ask(fake: FakeMessagesAPI, block: dict[str, Any], *, beta: bool = True) -> Any:
    headers = {"anthropic-beta": FILES_API_BETA} if beta else {}
    async with _client(fake) as client:
        return await client.messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": [block, {"type": "text", "text": "What?"}]}],  # type: ignore[misc,list-item]
            extra_headers=headers,
        )


async def test_an_uploaded_image_is_taken_by_its_id_with_the_beta(
    fake_llm: FakeMessagesAPI,
) -> None:
    file_id = await _upload(fake_llm, media.png(), "a.png", "image/png")
    fake_llm.reply("A dot.")

    answer = await _ask(fake_llm, {"type": "image", "source": {"type": "file", "file_id": file_id}})

    assert answer.content[0].text == "A dot."
    assert [u.id for u in fake_llm.uploads] == [file_id]


async def test_an_upload_without_the_beta_is_refused(fake_llm: FakeMessagesAPI) -> None:
    async with _client(fake_llm) as client:
        with pytest.raises(anthropic.BadRequestError):
            await client.beta.files.upload(file=("a.png", media.png(), "image/png"))

    assert fake_llm.uploads == []


async def test_an_empty_upload_is_refused(fake_llm: FakeMessagesAPI) -> None:
    with pytest.raises(anthropic.BadRequestError):
        await _upload(fake_llm, b"", "a.txt", "text/plain")


async def test_a_file_source_without_the_beta_is_refused(fake_llm: FakeMessagesAPI) -> None:
    file_id = await _upload(fake_llm, media.png(), "a.png", "image/png")

    with pytest.raises(anthropic.BadRequestError, match=r"source\.type"):
        await _ask(
            fake_llm, {"type": "image", "source": {"type": "file", "file_id": file_id}}, beta=False
        )
    fake_llm.discard_pending()
    assert len(fake_llm.unexpected) == 1
    fake_llm.reset()


async def test_a_file_id_the_api_did_not_issue_is_refused(fake_llm: FakeMessagesAPI) -> None:
    with pytest.raises(anthropic.BadRequestError, match="File not found"):
        await _ask(fake_llm, {"type": "image", "source": {"type": "file", "file_id": "file_x"}})
    fake_llm.reset()


async def test_a_pdf_named_in_an_image_block_is_refused(fake_llm: FakeMessagesAPI) -> None:
    file_id = await _upload(fake_llm, media.pdf(), "a.pdf", "application/pdf")

    with pytest.raises(anthropic.BadRequestError, match="not a supported image"):
        await _ask(fake_llm, {"type": "image", "source": {"type": "file", "file_id": file_id}})
    fake_llm.reset()


async def test_an_uploaded_pdf_is_taken_in_a_document_block(fake_llm: FakeMessagesAPI) -> None:
    file_id = await _upload(fake_llm, media.pdf(), "a.pdf", "application/pdf")
    fake_llm.reply("A spec.")

    answer = await _ask(
        fake_llm, {"type": "document", "source": {"type": "file", "file_id": file_id}}
    )

    assert answer.content[0].text == "A spec."
