"""Messages with `content` parts: stored files attached by id. The log keeps references,
each request to the model carries the files' bytes, valid for the (validating) fake."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.fakes import media
from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.chat import items, new_session
from tests.support.tools import agent_tools


async def _upload(client: httpx.AsyncClient, data: bytes, declared: str, name: str) -> str:
    response = await client.post(
        "/files", params={"filename": name}, content=data, headers={"Content-Type": declared}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _send(client: httpx.AsyncClient, session_id: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/messages", params={"wait": "true"}, json=body)


async def test_an_image_reaches_the_model_as_a_base64_image_block(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    data = media.png(1200, 800)
    file_id = await _upload(agent_client, data, "image/png", "plan.png")
    session_id = await new_session(agent_client)
    fake_llm.reply(text("A plan."))

    reply = await _send(
        agent_client,
        session_id,
        {
            "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image", "file_id": file_id},
            ]
        },
    )

    assert reply.status_code == 200, reply.text
    blocks = fake_llm.requests[0].body["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "What is it?"}
    image = {k: v for k, v in blocks[1].items() if k != "cache_control"}
    assert image == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(data).decode(),
        },
    }
    assert fake_llm.unexpected == []


async def test_the_log_keeps_the_files_reference_not_its_bytes(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    file_id = await _upload(agent_client, media.png(12, 8), "image/png", "plan.png")
    session_id = await new_session(agent_client)
    fake_llm.reply(text("ok"))

    await _send(agent_client, session_id, {"content": [{"type": "image", "file_id": file_id}]})

    user = (await items(agent_client, session_id))[0]
    assert user["content"][0]["type"] == "image"
    assert user["content"][0]["source"] is None
    assert user["content"][0]["file"]["file_id"] == file_id
    assert (user["content"][0]["file"]["width"], user["content"][0]["file"]["height"]) == (12, 8)


async def test_text_and_a_pdf_and_a_markdown_document_reach_the_model(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    pdf = media.pdf(2)
    pdf_id = await _upload(agent_client, pdf, "application/pdf", "spec.pdf")
    notes_id = await _upload(agent_client, b"# Notes\n- one", "text/markdown", "notes.md")
    session_id = await new_session(agent_client)
    fake_llm.reply(text("Read both."))

    reply = await _send(
        agent_client,
        session_id,
        {
            "content": [
                {"type": "text", "text": "Compare these."},
                {"type": "document", "file_id": pdf_id, "title": "The spec"},
                {"type": "document", "file_id": notes_id},
            ]
        },
    )

    assert reply.status_code == 200, reply.text
    blocks = fake_llm.requests[0].body["messages"][0]["content"]
    assert blocks[1]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(pdf).decode(),
    }
    assert blocks[1]["title"] == "The spec"
    assert blocks[2]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "# Notes\n- one",
    }
    assert blocks[2]["title"] == "notes.md"
    assert fake_llm.unexpected == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": "hi", "content": [{"type": "text", "text": "hi"}]},
        {"content": []},
        {"content": [{"type": "image"}]},
    ],
    ids=["neither", "both", "empty", "no-file-id"],
)
async def test_a_message_with_not_exactly_one_of_text_and_content_is_422(
    agent_client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    session_id = await new_session(agent_client)

    response = await agent_client.post(f"/sessions/{session_id}/messages", json=body)

    assert response.status_code == 422, response.text


async def test_an_unknown_file_is_422_naming_its_field(agent_client: httpx.AsyncClient) -> None:
    session_id = await new_session(agent_client)
    missing = "fil_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"

    response = await agent_client.post(
        f"/sessions/{session_id}/messages",
        json={"content": [{"type": "text", "text": "x"}, {"type": "image", "file_id": missing}]},
    )

    assert response.status_code == 422, response.text
    assert "content[1].file_id" in response.json()["detail"]


async def test_a_pdf_sent_as_an_image_is_422(agent_client: httpx.AsyncClient) -> None:
    pdf_id = await _upload(agent_client, media.pdf(), "application/pdf", "a.pdf")
    session_id = await new_session(agent_client)

    response = await agent_client.post(
        f"/sessions/{session_id}/messages",
        json={"content": [{"type": "image", "file_id": pdf_id}]},
    )

    assert response.status_code == 422, response.text


async def test_items_take_content_too(agent_client: httpx.AsyncClient) -> None:
    file_id = await _upload(agent_client, media.gif(3, 3), "image/gif", "g.gif")
    session_id = await new_session(agent_client)

    response = await agent_client.post(
        f"/sessions/{session_id}/items",
        json={"kind": "user_message", "content": [{"type": "image", "file_id": file_id}]},
    )

    assert response.status_code == 201, response.text
    assert response.json()["content"][0]["file"]["file_id"] == file_id


async def test_a_system_item_takes_no_content(agent_client: httpx.AsyncClient) -> None:
    session_id = await new_session(agent_client)

    response = await agent_client.post(
        f"/sessions/{session_id}/items",
        json={"kind": "system", "content": [{"type": "text", "text": "x"}]},
    )

    assert response.status_code == 422, response.text


async def test_a_deleted_file_reaches_the_model_as_a_placeholder(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    file_id = await _upload(agent_client, media.png(30, 20), "image/png", "plan.png")
    session_id = await new_session(agent_client)
    fake_llm.reply(text("seen"))
    await _send(agent_client, session_id, {"content": [{"type": "image", "file_id": file_id}]})
    await agent_client.delete(f"/files/{file_id}")
    fake_llm.reply(text("ok"))

    await _send(agent_client, session_id, {"text": "and now?"})

    first = fake_llm.requests[1].body["messages"][0]["content"][0]
    assert first["type"] == "text"
    assert first["text"] == "[image: plan.png 30\N{MULTIPLICATION SIGN}20 (deleted)]"
    assert fake_llm.unexpected == []


async def test_older_images_become_placeholders_after_compaction_and_the_summary_names_them(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    file_id = await _upload(agent_client, media.png(1200, 800), "image/png", "plan.png")
    session_id = await new_session(agent_client)
    fake_llm.reply(text("A floor plan."))
    await _send(agent_client, session_id, {"content": [{"type": "image", "file_id": file_id}]})
    fake_llm.reply(text("SUMMARY: the user showed a plan."))

    compacted = await agent_client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    assert compacted.status_code == 200, compacted.text
    prompt = fake_llm.requests[1].body["messages"][0]["content"][0]["text"]
    assert "[image: plan.png 1200\N{MULTIPLICATION SIGN}800]" in prompt
    fake_llm.reply(text("Continuing."))
    await _send(agent_client, session_id, {"text": "next"})
    after = fake_llm.requests[2].body["messages"]
    assert not [b for m in after for b in m["content"] if b.get("type") == "image"]
    assert fake_llm.unexpected == []


async def test_a_request_over_the_media_budget_compacts_first(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Two images in the segment, a budget of one: the second message's request starts a
    new segment instead of sending both (or dropping one mid-segment)."""
    settings = make_settings(
        anthropic_base_url=fake_llm.url, worker_poll_seconds=0.05, request_media_max_count=1
    )
    app: FastAPI = create_app(settings, tools=agent_tools())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            first = await _upload(client, media.png(10, 10), "image/png", "a.png")
            second = await _upload(client, media.png(20, 20), "image/png", "b.png")
            session_id = await new_session(client)
            fake_llm.reply(text("one"))
            await _send(client, session_id, {"content": [{"type": "image", "file_id": first}]})
            fake_llm.reply(text("SUMMARY"))
            fake_llm.reply(text("two"))

            reply = await _send(
                client, session_id, {"content": [{"type": "image", "file_id": second}]}
            )

            assert reply.json()["text"] == "two", reply.text
            summary = fake_llm.requests[1].body["messages"][0]["content"][0]["text"]
            assert "[image: a.png 10\N{MULTIPLICATION SIGN}10]" in summary
            sent = fake_llm.requests[2].body["messages"]
            images = [b for m in sent for b in m["content"] if b.get("type") == "image"]
            assert len(images) == 1
            assert images[0]["source"]["data"] == base64.b64encode(media.png(20, 20)).decode()
            assert fake_llm.unexpected == []


async def test_a_message_over_the_media_budget_is_422(make_settings: Any) -> None:
    settings = make_settings(request_media_max_count=1)
    app: FastAPI = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            ids = [await _upload(client, media.png(), "image/png", f"{n}.png") for n in "ab"]
            session_id = await new_session(client)

            response = await client.post(
                f"/sessions/{session_id}/messages",
                json={"content": [{"type": "image", "file_id": i} for i in ids]},
            )

    assert response.status_code == 422, response.text
    assert "STRATA_REQUEST_MEDIA_MAX_COUNT" in response.json()["detail"]
