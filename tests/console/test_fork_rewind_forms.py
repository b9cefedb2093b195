"""Fork and rewind from a session's page, posted as a browser would (the page's CSRF
token, then the redirect a plain form post gets): the fork at a turn, the rewind's
preview (a GET that changes nothing) and its confirmation, a rewind refused while a turn
runs, and what the page shows of a branch."""

from __future__ import annotations

import json
import re
import threading
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from app.console.api import PublicApi
from app.console.live import SessionFeed
from app.console.render import Renderer
from app.console.sse import StreamEvent
from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.chat import new_session, wait_job


async def _token(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


async def _two_turns(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> str:
    fake_llm.reply(text("one"))
    fake_llm.reply(text("two"))
    session_id = await new_session(client, title="Trip")
    for message in ("first", "second"):
        said = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
        )
        assert said.status_code == 200, said.text
    return session_id


def _turn_line(html: str, turn: int) -> str:
    found = re.search(rf'<li data-turn="{turn}"[^>]*>.*?</li>', html, re.S)
    assert found is not None, html
    return found.group(0)


async def test_every_turn_of_the_timeline_offers_fork_here_and_rewind_to_here(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    html = (await agent_client.get(f"/console/sessions/{session_id}")).text

    for turn in (1, 2):
        line = _turn_line(html, turn)
        assert f'name="at_turn" value="{turn}"' in line and "Fork here</button>" in line
        assert f'href="/console/sessions/{session_id}/rewind?to_turn={turn}"' in line


async def test_fork_here_makes_the_fork_at_that_turn_and_goes_to_it(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    page = f"/console/sessions/{session_id}"

    sent = await agent_client.post(
        f"{page}/fork", data={"csrf_token": await _token(agent_client, page), "at_turn": "1"}
    )

    assert sent.status_code == 303
    fork_id = sent.headers["location"].rsplit("/", 1)[1]
    fork = (await agent_client.get(f"/sessions/{fork_id}")).json()
    assert fork["forked_from"] == session_id and fork["fork_seq"] == 2
    shown = (await agent_client.get(sent.headers["location"])).text
    assert re.search(
        rf'Forked from <a href="/console/sessions/{session_id}">{session_id}</a> at turn 1\b',
        shown,
    )


async def test_the_rewind_preview_says_what_would_change_and_changes_nothing(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    await agent_client.post(f"/sessions/{session_id}/tasks", json={"subject": "Pack <bags>"})
    before = (await agent_client.get(f"/sessions/{session_id}")).json()["item_count"]

    shown = await agent_client.get(f"/console/sessions/{session_id}/rewind", params={"to_turn": 1})

    assert shown.status_code == 200
    assert "The model stops seeing turn 2." in shown.text
    assert "Pack &lt;bags&gt;" in shown.text  # a task the rewind takes back, escaped
    assert 'name="to_seq" value="2"' in shown.text
    after = (await agent_client.get(f"/sessions/{session_id}")).json()["item_count"]
    assert after == before


async def test_a_confirmed_rewind_flags_the_reverted_turn_and_offers_its_undo(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    page = f"/console/sessions/{session_id}"
    preview = f"{page}/rewind?to_turn=1"

    sent = await agent_client.post(
        f"{page}/rewind", data={"csrf_token": await _token(agent_client, preview), "to_seq": "2"}
    )

    assert sent.status_code == 303 and sent.headers["location"] == page
    html = (await agent_client.get(page)).text
    line = _turn_line(html, 2)
    assert 'class="reverted"' in line and '<span class="flag">reverted</span>' in line
    assert "Rewound at" in html
    assert f'href="{page}/rewind?to_seq=4">Undo (rewind to seq 4)' in html


async def test_a_rewind_while_a_turn_runs_shows_the_preview_again_with_the_apis_words(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    page = f"/console/sessions/{session_id}"
    token = await _token(agent_client, f"{page}/rewind?to_turn=1")
    gate = threading.Event()
    fake_llm.reply(text("eventually"), held=gate)
    running = await agent_client.post(f"/sessions/{session_id}/messages", json={"text": "go"})
    try:
        sent = await agent_client.post(f"{page}/rewind", data={"csrf_token": token, "to_seq": "2"})
    finally:
        gate.set()
    await wait_job(agent_client, running.json()["job_id"])

    assert sent.status_code == 409
    assert '<p class="alert" role="alert">' in sent.text
    assert "queued or running" in sent.text
    assert "Rewind</button>" in sent.text


async def test_the_live_feed_dims_the_items_of_the_turns_the_page_read_as_reverted() -> None:
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("items need no API call")

    feed = SessionFeed(
        PublicApi(no_app, None, buffer=8),
        Renderer(ZoneInfo("UTC")),
        resumed=False,
        session_id="ses_1",
        reverted=frozenset({2}),
    )
    for turn in (1, 2):
        item = {
            "kind": "system", "seq": turn, "turn": turn, "segment": 1, "session_id": "ses_1",
            "text": f"note {turn}", "created_at": "2026-12-03T14:23:05Z",
        }  # fmt: skip
        await feed.take(StreamEvent(str(turn), "item.appended", json.dumps({"item": item})))
    html = await feed.flush()

    assert '<li class="item system" data-turn="1"' in html
    assert '<li class="item system reverted" data-turn="2"' in html
    assert '<span class="flag">reverted</span>' in html
