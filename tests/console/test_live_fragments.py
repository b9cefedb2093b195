"""What a live page's stream turns API events into, rendered from the events alone (no API
call): a job's timeline of transitions and its context gauge; a session's compaction
markers and system notes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from html.parser import HTMLParser
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from starlette.requests import Request

from app.api.schemas.items import (
    AssistantMessageItem,
    CompactSummaryItem,
    SystemItem,
    ToolResultItem,
    UserMessageItem,
)
from app.console.api import PublicApi
from app.console.live import JobFeed, LastWord, SessionFeed, relay
from app.console.render import Renderer, oob
from app.console.sse import StreamEvent
from app.console.web import last_word_of
from app.domain.items import Origin
from app.settings import Settings


def _feed() -> JobFeed:
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the context gauge and transitions need no API call")

    return JobFeed(
        PublicApi(no_app, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False, job_id="job_1",
        movement="gather",
    )  # fmt: skip


def _event(name: str, data: dict[str, Any], event_id: str = "1") -> StreamEvent:
    return StreamEvent(event_id, name, json.dumps(data))


async def test_each_threshold_the_context_crosses_is_marked_on_the_gauge_with_its_movement() -> (
    None
):
    feed = _feed()

    await feed.take(_event("context.warn", {"movement": "gather", "ratio": 0.72}))
    await feed.take(_event("context.prompt", {"movement": "gather", "ratio": 0.86}))
    html = await feed.flush()

    gauge = html.rsplit('hx-swap-oob="innerHTML:#context-gauge"', 1)[1]
    assert 'value="86' in gauge
    assert "70% warn · crossed in gather" in gauge
    assert "85% wrap up · crossed in gather" in gauge
    assert '<li class="">95% forced transition</li>' in gauge
    assert "context 86.0% in gather: prompt" in html  # and a line in the timeline


async def test_a_transition_names_the_movement_it_left_and_the_next_one_starts_there() -> None:
    feed = _feed()
    step = {"next_step": "write", "summary": "Counted 3 regions", "lessons": "Use input/a.csv"}
    item = AssistantMessageItem(
        session_id="ses_1", seq=4, turn=1, segment=1, origin=Origin.llm,
        created_at=datetime(2026, 12, 3, 14, 23, 5, tzinfo=UTC),
        content=[{"type": "tool_use", "id": "toolu_1", "name": "transition", "input": step}],
    ).model_dump(mode="json")  # fmt: skip

    await feed.take(_event("item.appended", {"item": item}))
    html = await feed.flush()

    assert "<strong>gather</strong> → <strong>write</strong>" in html
    assert "Counted 3 regions" in html and "Use input/a.csv" in html
    assert feed.movement == "write"


async def test_a_compaction_is_marked_in_the_conversation_and_a_system_note_shown() -> None:
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("items need no API call")

    feed = SessionFeed(PublicApi(no_app, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False)
    meta: dict[str, Any] = {
        "session_id": "ses_1", "turn": 3, "segment": 2, "origin": Origin.system,
        "created_at": datetime(2026, 12, 3, 14, 23, 5, tzinfo=UTC),
    }  # fmt: skip
    summary = CompactSummaryItem(seq=7, text="We planned the memo.", **meta)
    note = SystemItem(seq=8, text="Tasks: [1] pending: Outline", **meta)

    for item in (summary, note):
        await feed.take(_event("item.appended", {"item": item.model_dump(mode="json")}))
    html = await feed.flush()

    assert "The conversation before this point was summarized" in html
    assert "We planned the memo." in html
    assert '<span class="who">System note</span>' in html
    assert "Tasks: [1] pending: Outline" in html


async def test_a_region_the_api_could_not_read_for_a_moment_is_rendered_at_the_next_flush() -> None:
    """A status event marks the job's regions for a read; a read that meets the API busy
    (503) keeps the region marked, or it would show what it showed before the event, for
    good if that was the job's last event."""
    answers = [(503, {"title": "Service Unavailable", "status": 503})]

    async def api(scope: Any, receive: Any, send: Any) -> None:
        body: Mapping[str, object]
        if scope["path"].endswith("/comments"):
            status, body = 200, {"data": []}
        else:
            status, body = answers.pop(0) if answers else (200, {"id": "job_1"})
        await send(
            {"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json")]}
        )  # fmt: skip
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    feed = JobFeed(
        PublicApi(api, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False, job_id="job_1"
    )
    feed.dirty.add("comments")

    first = await feed.flush()
    second = await feed.flush()

    assert (first, feed.dirty) == ("", set())
    assert 'hx-swap-oob="innerHTML:#comment-list"' in second


async def test_a_stream_that_ends_tries_an_unreadable_region_as_often_as_the_settings_say() -> None:
    """STRATA_CONSOLE_STREAM_LAST_TRIES / _LAST_TRY_SECONDS: the job's last event marks its
    regions, the API stays busy, and the stream's last word reads them that many times."""
    reads = {"job": 0}
    ended = {"job_id": "job_1", "status": "succeeded"}

    async def api(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"].endswith("/events"):
            head = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            frame = f"id: 7\nevent: job.status\ndata: {json.dumps(ended)}\n\n"
            await send({"type": "http.response.body", "body": frame.encode()})
            return
        reads["job"] += scope["path"] == "/jobs/job_1"
        problem = {"title": "Service Unavailable", "status": 503}
        head = [(b"content-type", b"application/problem+json")]
        await send({"type": "http.response.start", "status": 503, "headers": head})
        await send({"type": "http.response.body", "body": json.dumps(problem).encode()})

    async def reads_with(tries: int) -> int:
        reads["job"] = 0
        feed = JobFeed(
            PublicApi(api, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False, job_id="job_1"
        )
        frames = [
            f
            async for f in relay(
                PublicApi(api, None, buffer=8),
                "/jobs/job_1/events",
                None,
                feed,
                LastWord(tries, 0.0),
            )
        ]
        assert frames[-1].startswith(b"event: end")
        return reads["job"]

    regions = 4  # summary, files, subtasks, comments: each reads the job first
    assert await reads_with(1) == regions
    assert await reads_with(3) == regions * 3


async def test_a_live_page_takes_its_last_word_from_the_settings() -> None:
    """The routes' `LastWords` dependency: STRATA_CONSOLE_STREAM_LAST_TRIES and
    STRATA_CONSOLE_STREAM_LAST_TRY_SECONDS, as set."""
    settings = Settings(
        _env_file=None, console_stream_last_tries=5, console_stream_last_try_seconds=0.5
    )
    app = SimpleNamespace(state=SimpleNamespace(settings=settings))
    request = Request({"type": "http", "app": app, "headers": []})

    assert await last_word_of(request) == LastWord(5, 0.5)


class _Elements(HTMLParser):
    """Every start tag of a fragment, with its attributes (template contents included)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def ids(self) -> set[str]:
        return {str(a["id"]) for _, a in self.tags if a.get("id")}

    def targets(self) -> list[str]:
        return [str(a["hx-swap-oob"]) for _, a in self.tags if "hx-swap-oob" in a]


async def test_a_result_whose_call_id_holds_a_quote_goes_into_its_call_and_injects_nothing() -> (
    None
):
    """A log written before ids were rewritten where they enter still holds such an id."""
    bad = 'toolu_1"><b id="injected" hx-post="/console/sessions/ses_1/messages">'

    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("items need no API call")

    feed = SessionFeed(PublicApi(no_app, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False)
    meta: dict[str, Any] = {
        "session_id": "ses_1", "turn": 1, "segment": 1,
        "created_at": datetime(2026, 12, 3, 14, 23, 5, tzinfo=UTC),
    }  # fmt: skip
    call = {"type": "tool_use", "id": bad, "name": "Bash", "input": {"command": "ls"}}
    items = [
        AssistantMessageItem(seq=2, origin=Origin.llm, content=[call], **meta),
        ToolResultItem(seq=3, origin=Origin.llm, tool_use_id=bad, content="a.txt", **meta),
    ]

    for item in items:
        await feed.take(_event("item.appended", {"item": item.model_dump(mode="json")}))
    page = _Elements(await feed.flush())

    assert "injected" not in page.ids()
    assert not any("hx-post" in attrs for _, attrs in page.tags)
    [result_target] = [t for t in page.targets() if t.startswith("innerHTML:#result-")]
    assert result_target.removeprefix("innerHTML:#") in page.ids()  # the call's own element


def test_a_fragment_names_no_target_a_selector_could_not_name_as_it_is() -> None:
    with pytest.raises(ValueError, match="not an element id"):
        oob('result-x"><b>', "")


def test_streamed_text_and_activity_lines_are_text_on_the_page() -> None:
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("no API call")

    feed = SessionFeed(PublicApi(no_app, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False)

    feed.delta({"text": '<b id="injected">'})
    feed.activity('<i id="also">')
    page = _Elements("".join(feed.out))

    assert page.ids() == set()
    assert [tag for tag, _ in page.tags] == ["template", "div", "span", "template", "div"]


async def test_a_movements_instructions_are_folded_to_their_first_line() -> None:
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("items need no API call")

    feed = SessionFeed(PublicApi(no_app, None, buffer=8), Renderer(ZoneInfo("UTC")), resumed=False)
    meta: dict[str, Any] = {
        "session_id": "ses_1", "turn": 1, "segment": 1,
        "created_at": datetime(2026, 12, 3, 14, 23, 5, tzinfo=UTC),
    }  # fmt: skip
    prompt = "## Movement: gather\n" + "Read every source and note what it says.\n" * 40
    instructions = UserMessageItem(seq=1, content=[{"type": "text", "text": prompt}],
                                   origin=Origin.system, **meta)  # fmt: skip
    asked = UserMessageItem(seq=2, content=[{"type": "text", "text": "## Mine"}],
                            origin=Origin.user, **meta)  # fmt: skip

    for item in (instructions, asked):
        await feed.take(_event("item.appended", {"item": item.model_dump(mode="json")}))
    html = await feed.flush()

    assert '<details class="prompt"><summary>## Movement: gather</summary>' in html
    assert '<div class="text">## Mine</div>' in html
