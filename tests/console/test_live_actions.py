"""The actions panel over a page's live stream: `action.required` / `action.resolved`
render the panel of what waits now, and only when that changed (its forms may hold an
input being edited)."""

from __future__ import annotations

import json
from typing import Any
from zoneinfo import ZoneInfo

from app.console.api import PublicApi
from app.console.live import SessionFeed, actions_digest
from app.console.render import Renderer
from app.console.sse import StreamEvent

ACTION = {
    "id": "act_01KBFQ7ZD4R3YJ8W2N5T6V9XAC", "job_id": "job_1", "session_id": "ses_1",
    "tool_use_id": "toolu_1", "tool": "Bash", "input": {"command": "rm -rf </tmp>"},
    "kind": "tool", "rule": None, "status": "pending", "decision": None,
    "decided_input": None, "content": None, "is_error": False, "reason": None,
    "on_timeout": None, "created_at": "2026-12-07T10:00:00Z", "expires_at": None,
    "resolved_at": None,
}  # fmt: skip


def _feed(pending: list[dict[str, Any]], shown: str = "") -> SessionFeed:
    """A session page's feed whose API answers the session's waiting turn with `pending`."""

    async def api(scope: Any, receive: Any, send: Any) -> None:
        assert scope["path"] == "/jobs", scope["path"]
        body = {"data": [{"id": "job_1", "required_action": pending}], "next_cursor": None}
        head = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    return SessionFeed(
        PublicApi(api, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False,
        session_id="ses_1", actions=shown,
    )  # fmt: skip


def _event(name: str) -> StreamEvent:
    return StreamEvent("3", name, json.dumps({**ACTION, "type": name}))


async def test_an_action_required_renders_the_panel_with_the_call_escaped() -> None:
    feed = _feed([ACTION])

    await feed.take(_event("action.required"))
    html = await feed.flush()

    assert 'hx-swap-oob="innerHTML:#actions"' in html
    assert f'id="{ACTION["id"]}"' in html and "<code>Bash</code>" in html
    assert "rm -rf &lt;/tmp&gt;" in html and "</tmp>" not in html


async def test_a_replayed_event_leaves_the_panel_the_page_shows_as_it_is() -> None:
    feed = _feed([ACTION], shown=actions_digest([ACTION]))

    await feed.take(_event("action.required"))

    assert await feed.flush() == ""


async def test_an_action_resolved_empties_the_panel() -> None:
    feed = _feed([], shown=actions_digest([ACTION]))

    await feed.take(_event("action.resolved"))
    html = await feed.flush()

    assert 'hx-swap-oob="innerHTML:#actions"' in html and "action-card" not in html
