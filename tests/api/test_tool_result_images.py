"""Images in tool results, end to end against the validating fake Messages API: an MCP
tool's image content and a Read of an image in a job's workspace are stored as files of
the tenant and the next request carries them as image blocks inside the tool_result,
within the request's media budget; an image that cannot be sent is a text note."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import media
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import items, new_session, submit_job, wait_job
from tests.support.mcp import (
    ALLOW_MCP,
    HttpServer,
    last_result,
    mcp_settings,
    say,
    servers_file,
)
from tests.support.settings import MakeSettings

TIMES = "\N{MULTIPLICATION SIGN}"

LOOK = """\
name: look
description: one step that reads the workspace's images
movements:
  - name: only
    instruction: Look at the pictures, then complete.
    allowed_tools: [Read]
    transitions: [COMPLETE]
"""

Serve = Callable[..., AbstractAsyncContextManager[tuple[Any, httpx.AsyncClient]]]


@pytest.fixture
def strata(make_settings: MakeSettings, fake_llm: FakeMessagesAPI, tmp_path: Path) -> Serve:
    """A server with the fault server as the operator's stdio server `faults` and a piece
    `look` whose movement may Read; `overrides` change its settings."""
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "look.yaml").write_text(LOOK, encoding="utf-8")
    servers = servers_file(tmp_path)

    def started(**overrides: Any) -> AbstractAsyncContextManager[tuple[Any, httpx.AsyncClient]]:
        settings = mcp_settings(
            make_settings,
            fake_llm,
            servers,
            pieces_dir=pieces,
            mcp_allow_private=True,
            **overrides,
        )
        return serve(settings)

    return started


@pytest.fixture
async def api(strata: Serve) -> AsyncIterator[httpx.AsyncClient]:
    async with strata() as (_, client):
        yield client


def images_in(result: dict[str, Any]) -> list[dict[str, Any]]:
    content = result["content"]
    return [] if isinstance(content, str) else [b for b in content if b["type"] == "image"]


def all_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The image blocks of the messages, those inside tool results too."""
    found: list[dict[str, Any]] = []
    for message in messages:
        for block in message["content"]:
            inner = block.get("content") if block["type"] == "tool_result" else None
            found.extend(
                b
                for b in [block, *(inner if isinstance(inner, list) else [])]
                if b["type"] == "image"
            )
    return found


def texts_in(result: dict[str, Any]) -> str:
    content = result["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b["type"] == "text")


async def test_an_mcp_tools_image_reaches_the_model_as_an_image_block_in_its_result(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI, everything_http: HttpServer
) -> None:
    body = {"name": "every", "url": everything_http.url(), "trusted": True}
    assert (await api.post("/mcp-servers", json=body)).status_code == 201
    fake_llm.reply(tool_use("mcp__every__get-tiny-image", {}))
    fake_llm.reply(text("It is the MCP logo."))
    session_id = await new_session(api, mcp=[{"server": "every", "tools": ["get-tiny-image"]}])

    await say(api, session_id, "show me the logo")

    result = last_result(fake_llm)
    [image] = images_in(result)
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    assert "The image above is the MCP logo." in texts_in(result)
    assert fake_llm.unexpected == []


async def test_the_log_names_an_mcp_image_as_a_stored_file_of_the_tenant(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__picture", {"width": 30, "height": 20}))
    fake_llm.reply(text("A black picture."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    await say(api, session_id, "draw")

    [result] = [i for i in await items(api, session_id) if i["kind"] == "tool_result"]
    [image] = [b for b in result["content"] if b["type"] == "image"]
    stored = await api.get(f"/files/{image['file']['file_id']}")
    assert stored.status_code == 200, stored.text
    assert (stored.json()["media_type"], stored.json()["width"]) == ("image/png", 30)
    [sent] = images_in(last_result(fake_llm))
    assert base64.b64decode(sent["source"]["data"]) == media.png(30, 20)


async def test_an_mcp_image_the_messages_api_would_refuse_is_a_text_note(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__picture", {"width": 9000, "height": 2}))
    fake_llm.reply(text("Too wide."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    reply = await say(api, session_id, "draw wide")

    assert reply["job"]["status"] == "succeeded"
    result = last_result(fake_llm)
    assert images_in(result) == []
    assert f"9000{TIMES}2 pixels" in texts_in(result) and "not sent" in texts_in(result)
    assert "a 9000 by 2 picture" in texts_in(result)
    assert fake_llm.unexpected == []


async def test_mcp_image_content_that_is_no_image_is_a_text_note(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__not_picture", {}))
    fake_llm.reply(text("Nothing to see."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)

    reply = await say(api, session_id, "draw nothing")

    assert reply["job"]["status"] == "succeeded"
    result = last_result(fake_llm)
    assert images_in(result) == [] and "not sent" in texts_in(result)
    assert fake_llm.unexpected == []


async def _look(client: httpx.AsyncClient, pictures: dict[str, bytes]) -> dict[str, Any]:
    job = await submit_job(client, piece="look", start=False)
    for name, data in pictures.items():
        put = await client.put(f"/jobs/{job['id']}/files/input/{name}", content=data)
        assert put.status_code in (200, 201), put.text
    started = await client.post(f"/jobs/{job['id']}/start")
    assert started.status_code in (200, 202), started.text
    return await wait_job(client, job["id"], seconds=60)


def _transition() -> Any:
    return tool_use("transition", {"next_step": "COMPLETE", "summary": "looked"})


async def test_a_read_of_a_png_in_the_workspace_reaches_the_model_as_an_image_block(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("Read", {"path": "input/plan.png"}))
    fake_llm.reply(_transition())

    ended = await _look(api, {"plan.png": media.png(12, 8)})

    assert ended["status"] == "succeeded", ended
    results = [
        b
        for b in fake_llm.requests[1].body["messages"][-1]["content"]
        if b["type"] == "tool_result"
    ]
    [image] = images_in(results[0])
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == media.png(12, 8)
    assert fake_llm.unexpected == []


async def test_read_images_over_the_request_media_budget_become_placeholders(
    strata: Serve, fake_llm: FakeMessagesAPI
) -> None:
    """A budget of one image: the request after two Reads carries the newer one and a
    placeholder naming the older."""
    fake_llm.reply(tool_use("Read", {"path": "input/a.png"}))
    fake_llm.reply(tool_use("Read", {"path": "input/b.png"}))
    fake_llm.reply(_transition())

    async with strata(request_media_max_count=1) as (_, client):
        ended = await _look(client, {"a.png": media.png(10, 10), "b.png": media.png(20, 20)})

    assert ended["status"] == "succeeded", ended
    messages = fake_llm.requests[2].body["messages"]
    results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    first, second = results[-2:]
    assert images_in(first) == []
    assert f"[image: a.png 10{TIMES}10]" in texts_in(first)
    [image] = images_in(second)
    assert base64.b64decode(image["source"]["data"]) == media.png(20, 20)
    assert fake_llm.unexpected == []


async def test_an_mcp_image_becomes_a_placeholder_when_a_new_segment_starts(
    api: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("mcp__faults__picture", {"width": 30, "height": 20}))
    fake_llm.reply(text("A black picture."))
    session_id = await new_session(api, mcp=[{"server": "faults"}], tool_policy=ALLOW_MCP)
    await say(api, session_id, "draw")
    assert len(all_images(fake_llm.requests[1].body["messages"])) == 1
    fake_llm.reply(text("SUMMARY: the tool drew a picture."))

    compacted = await api.post(f"/sessions/{session_id}/compact", params={"wait": "true"})

    assert compacted.status_code == 200, compacted.text
    prompt = json.dumps(fake_llm.requests[2].body["messages"], ensure_ascii=False)
    assert f"[image: mcp__faults__picture-2.png 30{TIMES}20]" in prompt
    fake_llm.reply(text("Continuing."))
    await say(api, session_id, "next")
    after = fake_llm.requests[3].body["messages"]
    assert all_images(after) == []
    assert fake_llm.unexpected == []
