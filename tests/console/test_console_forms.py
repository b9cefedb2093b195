"""The console's forms that the browser tests do not walk through, posted as a browser
would (the page's CSRF token, then the redirect a plain form post gets)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.support.apps import serve
from tests.support.chat import submit_job


async def _token(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


async def test_cancel_on_a_job_page_cancels_the_draft_and_its_page_says_so(
    client: httpx.AsyncClient,
) -> None:
    job = await submit_job(client, start=False)
    page = f"/console/jobs/{job['id']}"

    sent = await client.post(f"{page}/cancel", data={"csrf_token": await _token(client, page)})

    assert sent.status_code == 303 and sent.headers["location"] == page
    assert (await client.get(f"/jobs/{job['id']}")).json()["status"] == "cancelled"
    shown = (await client.get(page)).text
    assert 'id="job-status">cancelled<' in shown
    assert "Cancel</button>" not in shown  # an ended job has nothing to cancel


async def test_a_subscription_is_disabled_and_enabled_again_from_its_page(
    make_settings: Any,
) -> None:
    settings = make_settings(webhook_allow_private=True, run_worker_in_server=False)
    async with serve(settings) as (_, client):
        created = await client.post(
            "/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]}
        )
        assert created.status_code == 201, created.text
        hook = f"/webhooks/{created.json()['id']}"
        states = []
        for enabled in ("false", "true"):
            token = await _token(client, f"/console{hook}")
            sent = await client.post(
                f"/console{hook}/enabled", data={"csrf_token": token, "enabled": enabled}
            )
            assert sent.status_code == 303
            states.append((await client.get(hook)).json()["enabled"])

    assert states == [False, True]


async def test_the_new_session_form_offers_only_the_tools_a_chat_turn_can_use(
    client: httpx.AsyncClient,
) -> None:
    tools = (await client.get("/tools")).json()["data"]
    page = (await client.get("/console/sessions")).text
    offered = set(re.findall(r'name="tools" value="([^"]+)"', page))

    assert offered == {tool["name"] for tool in tools if tool["in_chat"]}
    assert not offered & {"transition", "spawn_subtask"}


async def test_continue_makes_a_session_that_continues_this_one_with_its_settings(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post(
        "/sessions", json={"title": "Memo", "model": "claude-x", "tools": ["TaskList"]}
    )
    page = f"/console/sessions/{created.json()['id']}"

    sent = await client.post(f"{page}/continue", data={"csrf_token": await _token(client, page)})

    assert sent.status_code == 303
    new_id = sent.headers["location"].rsplit("/", 1)[1]
    new = (await client.get(f"/sessions/{new_id}")).json()
    assert (new["continues_from"], new["title"]) == (created.json()["id"], "Memo (continued)")
    assert (new["model"], new["tools"]) == ("claude-x", ["TaskList"])


async def test_compact_now_queues_a_compaction_of_the_session(client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/sessions", json={})).json()["id"]
    page = f"/console/sessions/{session_id}"

    sent = await client.post(f"{page}/compact", data={"csrf_token": await _token(client, page)})

    assert (sent.status_code, sent.headers["location"]) == (303, page)
    jobs = (await client.get("/jobs", params={"session_id": session_id})).json()["data"]
    assert [job["kind"] for job in jobs] == ["compaction"]


async def test_delete_removes_the_session_only_when_confirmed(client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/sessions", json={})).json()["id"]
    page = f"/console/sessions/{session_id}"

    unconfirmed = await client.post(
        f"{page}/delete", data={"csrf_token": await _token(client, page)}
    )
    kept = (await client.get(f"/sessions/{session_id}")).status_code
    confirmed = await client.post(
        f"{page}/delete", data={"csrf_token": await _token(client, page), "confirm": "yes"}
    )

    assert (unconfirmed.status_code, kept) == (303, 200)
    assert (confirmed.status_code, confirmed.headers["location"]) == (303, "/console/sessions")
    assert (await client.get(f"/sessions/{session_id}")).status_code == 404
