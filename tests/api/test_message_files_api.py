"""STRATA_LLM_USE_FILES_API: images and PDFs a request carries go by their Anthropic Files
API id, uploaded once per account and kept across turns and restarts; the (validating)
fake Messages API takes a `file` source only for an id it issued, with the beta header."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from app.engine.llm import FILES_API_BETA
from app.settings import Settings
from tests.fakes import media
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, text
from tests.support.apps import serve
from tests.support.chat import new_session
from tests.support.tools import agent_tools


@pytest.fixture
def files_api_settings(agent_settings: Settings) -> Settings:
    return agent_settings.model_copy(update={"llm_use_files_api": True})


async def _upload(client: httpx.AsyncClient, data: bytes, declared: str, name: str) -> str:
    response = await client.post(
        "/files", params={"filename": name}, content=data, headers={"Content-Type": declared}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _ask(client: httpx.AsyncClient, session_id: str, parts: list[dict[str, Any]]) -> None:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"content": parts}
    )
    assert response.status_code == 200, response.text


def _source(request: RecordedRequest, message: int, block: int) -> Any:
    return request.body["messages"][message]["content"][block]["source"]


def _betas(request: RecordedRequest) -> set[str]:
    return {b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b}


async def test_an_image_is_uploaded_once_and_the_request_names_it_by_id(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("A plan."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(1200, 800), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])

    [uploaded] = fake_llm.uploads
    assert (uploaded.filename, uploaded.mime_type) == ("plan.png", "image/png")
    assert uploaded.data == media.png(1200, 800)
    request = fake_llm.requests[0]
    assert _source(request, 0, 0) == {"type": "file", "file_id": uploaded.id}
    assert FILES_API_BETA in _betas(request)
    assert fake_llm.unexpected == []


async def test_a_second_turn_names_the_same_id_without_uploading_again(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("A plan."))
    fake_llm.reply(text("Still a plan."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])
        await _ask(client, session_id, [{"type": "text", "text": "And now?"}])

    [uploaded] = fake_llm.uploads
    assert _source(fake_llm.requests[1], 0, 0) == {"type": "file", "file_id": uploaded.id}


async def test_a_restart_names_the_kept_id_without_uploading_again(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("A plan."))
    fake_llm.reply(text("The same plan."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])
    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        other = await new_session(client)
        await _ask(client, other, [{"type": "image", "file_id": file_id}])

    [uploaded] = fake_llm.uploads
    assert _source(fake_llm.requests[1], 0, 0) == {"type": "file", "file_id": uploaded.id}


async def test_a_pdf_goes_by_id_and_a_text_document_as_its_text(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("Read."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        pdf = await _upload(client, media.pdf(2), "application/pdf", "spec.pdf")
        notes = await _upload(client, b"Ship on Friday.\n", "text/plain", "notes.txt")
        session_id = await new_session(client)
        await _ask(
            client,
            session_id,
            [{"type": "document", "file_id": pdf}, {"type": "document", "file_id": notes}],
        )

    [uploaded] = fake_llm.uploads
    assert uploaded.mime_type == "application/pdf"
    blocks = fake_llm.requests[0].body["messages"][0]["content"]
    assert blocks[0]["source"] == {"type": "file", "file_id": uploaded.id}
    assert blocks[0]["title"] == "spec.pdf"
    assert blocks[1]["source"]["type"] == "text"
    assert fake_llm.unexpected == []


async def test_with_the_setting_off_nothing_is_uploaded_and_the_bytes_go(
    agent_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("A plan."))

    async with serve(agent_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])

    assert fake_llm.uploads == []
    request = fake_llm.requests[0]
    assert _source(request, 0, 0)["type"] == "base64"
    assert FILES_API_BETA not in _betas(request)


async def test_a_failed_upload_sends_the_bytes_and_the_next_request_uploads_it(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    """An upload that still fails after the SDK's retries (3 attempts here) leaves that
    request carrying the bytes; the next request that carries the file uploads it."""
    fake_llm.fail_uploads(500, 500, 500)
    fake_llm.reply(text("A plan."))
    fake_llm.reply(text("Still a plan."))
    data = media.png()

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, data, "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])
        await _ask(client, session_id, [{"type": "text", "text": "And now?"}])

    first, second = fake_llm.requests
    assert _source(first, 0, 0)["data"] == base64.b64encode(data).decode()
    assert FILES_API_BETA not in _betas(first)
    [uploaded] = fake_llm.uploads
    assert _source(second, 0, 0) == {"type": "file", "file_id": uploaded.id}


async def test_a_deleted_file_is_a_placeholder_not_an_upload(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("A plan."))
    fake_llm.reply(text("Gone."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])
        assert (await client.delete(f"/files/{file_id}")).status_code == 204
        await _ask(client, session_id, [{"type": "text", "text": "And now?"}])

    block = fake_llm.requests[1].body["messages"][0]["content"][0]
    assert block["type"] == "text" and "(deleted)" in block["text"]
    assert len(fake_llm.uploads) == 1


async def test_an_id_the_api_no_longer_knows_is_forgotten_and_the_file_uploaded_again(
    files_api_settings: Settings, fake_llm: FakeMessagesAPI
) -> None:
    """A file deleted (or expired) at Anthropic: the request naming it is refused, the id
    is forgotten, and the request goes once more with the file uploaded again."""
    fake_llm.reply(text("A plan."))
    fake_llm.reply(text("The plan again."))

    async with serve(files_api_settings, tools=agent_tools()) as (_, client):
        file_id = await _upload(client, media.png(), "image/png", "plan.png")
        session_id = await new_session(client)
        await _ask(client, session_id, [{"type": "image", "file_id": file_id}])
        first = fake_llm.uploads[0].id
        fake_llm.delete_upload(first)
        await _ask(client, session_id, [{"type": "text", "text": "And now?"}])

    [refused] = fake_llm.unexpected
    assert f"File not found: {first}" in refused.reason
    again = fake_llm.uploads[1].id
    assert _source(fake_llm.requests[-1], 0, 0) == {"type": "file", "file_id": again}
    fake_llm.reset()  # the refused request was the test's own doing
