"""A live page's stream resumes where it was: the console's events carry the API's event
ids, and a reconnect with Last-Event-ID gets only what came after."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.console.conftest import KEYS, Console
from tests.fakes.messages_api import FakeMessagesAPI

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@contextmanager
def _signed_in(console: Console, tenant: str = "acme") -> Iterator[httpx.Client]:
    """A client holding the console's cookies after the sign-in form was sent."""
    with httpx.Client(base_url=console.url, timeout=15.0) as client:
        yield _sign_in(client, tenant)


def _sign_in(client: httpx.Client, tenant: str) -> httpx.Client:
    page = client.get("/console/sign-in")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    answer = client.post(
        "/console/sign-in",
        data={"csrf_token": token.group(1), "key": KEYS[tenant], "next": "/console/sessions"},
    )
    assert answer.status_code == 303, answer.text
    return client


def _console_events(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each `console` event of the stream."""
    event_id: str | None = None
    name = "message"
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if name == "console" and data:
                yield event_id, "\n".join(data)
            event_id, name, data = None, "message", []
        elif line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


def _first_frame(client: httpx.Client, path: str, last_event_id: str | None) -> tuple[str, str]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event_id, data = next(_console_events(response))
    assert event_id is not None
    return event_id, data


def _turn(console: Console, session_id: str, text: str) -> None:
    with console.api() as api:
        answer = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": text}
        )
        assert answer.status_code == 200, answer.text


def test_a_reconnected_session_page_gets_only_what_came_after_its_last_event(
    console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply("The first answer.")
    fake_llm.reply("The second answer.")
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "resume"}).json()["id"]
    _turn(console, session_id, "first question")
    live = f"/console/sessions/{session_id}/live"

    with _signed_in(console) as client:
        seen, replayed = _first_frame(client, live, None)
        _turn(console, session_id, "second question")
        _, resumed = _first_frame(client, live, seen)

    assert "first question" in replayed and "The first answer." in replayed
    assert "second question" in resumed and "The second answer." in resumed
    # the conversation's items: the reconnected page gets the second turn's only
    first_turn, second_turn = _item_seqs(replayed), _item_seqs(resumed)
    assert first_turn and second_turn
    assert min(second_turn) > max(first_turn)


def _item_seqs(frame: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<li class="item [^"]+"[^>]* data-seq="(\d+)"', frame)]


def test_the_replay_renders_the_task_board_again_only_when_the_tasks_changed(
    console: Console, fake_llm: FakeMessagesAPI
) -> None:
    """The board holds forms a person may be filling in (a move chosen, an edit typed):
    the replay a page opens with must not put a fresh board over them."""
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "board"}).json()["id"]
        created = api.post(f"/sessions/{session_id}/tasks", json={"subject": "Keep me"})
        assert created.status_code == 201
    board = 'hx-swap-oob="innerHTML:#task-board"'

    with _signed_in(console) as client:
        page = client.get(f"/console/sessions/{session_id}")
        live = re.search(r'data-live="([^"]+)"', page.text)
        assert live is not None
        _, current = _first_frame(client, live.group(1).replace("&amp;", "&"), None)
        _, stale = _first_frame(client, f"/console/sessions/{session_id}/live?board=old", None)

    assert "Keep me" in current  # the replayed log: the task's creation
    assert board not in current
    assert board in stale and "Keep me" in stale.split(board, 1)[1]
