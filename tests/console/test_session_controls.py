"""A session's controls in a real browser: the new-session form's tools, continue into a
new session, compact, delete; and what the conversation shows of text that is not the
user's: an answer's raw HTML inert, a movement's long instructions folded."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import sign_in, wait_live
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

INJECTED = '<script>window.__injected = 1</script>\n\n<img src=x onerror="window.__injected = 2">'


def _answered(console: Console, fake_llm: FakeMessagesAPI, title: str, answer: str) -> str:
    """A session whose first turn the fake answered with `answer`."""
    fake_llm.reply(text(answer))
    with console.api() as api:
        session_id: str = api.post("/sessions", json={"title": title}).json()["id"]
        answered = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
        )
        assert answered.status_code == 200, answered.text
    return session_id


def _ended(api: httpx.Client, job_id: str) -> None:
    """Wait until the job has succeeded."""
    for _ in range(600):
        status = api.get(f"/jobs/{job_id}").json()["status"]
        if status == "succeeded":
            return
        assert status in ("queued", "running"), status
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never ended")


def test_the_new_session_form_offers_only_chat_tools_and_the_session_gets_those_ticked(
    page: Page, console: Console
) -> None:
    with console.api() as api:
        tools = api.get("/tools").json()["data"]
    sign_in(page)
    offered = page.locator("input[name=tools]")
    expect(offered).to_have_count(sum(1 for tool in tools if tool["in_chat"]))
    for piece_only in ("transition", "spawn_subtask"):
        expect(page.locator(f"input[name=tools][value={piece_only}]")).to_have_count(0)

    chosen = [tool["name"] for tool in tools if tool["in_chat"]][:2]
    page.get_by_label("Title", exact=True).fill("Two tools")
    page.get_by_label("only the ones ticked:").check()
    for box in offered.all():
        if box.get_attribute("value") not in chosen:
            box.uncheck()
    page.get_by_role("button", name="Create session").click()

    expect(page.get_by_role("heading", name="Two tools")).to_be_visible()
    session_id = page.url.rsplit("/", 1)[1]
    with console.api() as api:
        assert api.get(f"/sessions/{session_id}").json()["tools"] == chosen


def test_raw_html_in_an_answer_shows_as_text_and_never_runs(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _answered(console, fake_llm, "Injected", f"**Careful**: {INJECTED}")
    sign_in(page, then=f"/console/sessions/{session_id}")

    answer = page.locator("#conversation .item.assistant_message .markdown")
    expect(answer.locator("strong")).to_have_text("Careful")
    expect(answer).to_contain_text("<script>window.__injected = 1</script>")
    expect(answer.locator("script, img")).to_have_count(0)
    assert page.evaluate("() => window.__injected") is None


def test_a_movements_long_instructions_are_folded_to_their_first_line(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("transition", {"next_step": "COMPLETE", "summary": "Nothing to do"}))
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "Piece run"}).json()["id"]
        job = api.post(
            "/jobs",
            json={"instruction": "Answer nothing.", "piece": "ask-once", "session_id": session_id},
        )
        assert job.status_code == 201, job.text
        _ended(api, job.json()["id"])
    sign_in(page, then=f"/console/sessions/{session_id}")

    prompt = page.locator("#conversation details.prompt").filter(has_text="Answer nothing.")
    expect(prompt).to_have_count(1)
    expect(prompt.locator(".text")).to_be_hidden()
    folded = prompt.locator("summary").text_content() or ""
    assert folded.strip() and "\n" not in folded.strip()  # its first line only
    prompt.locator("summary").click()
    expect(prompt.locator(".text")).to_be_visible()


def test_continue_makes_the_new_session_and_opens_it(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _answered(console, fake_llm, "Memo", "The memo has three parts.")
    sign_in(page, then=f"/console/sessions/{session_id}")

    page.get_by_role("button", name="Continue in a new session").click()

    expect(page.get_by_role("heading", name="Memo (continued)")).to_be_visible()
    expect(page).not_to_have_url(re.compile(re.escape(session_id) + "$"))
    expect(page.locator(".page-head").get_by_role("link", name=session_id)).to_be_visible()
    page.locator("#memory summary").first.click()
    expect(page.locator("#memory .memory-block")).to_contain_text("The memo has three parts.")


def test_compact_now_summarizes_the_conversation_on_the_page(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _answered(console, fake_llm, "Long talk", "Working on the parser.")
    fake_llm.reply(text("SUMMARY: the parser is half done."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)

    page.get_by_role("button", name="Compact now").click()

    summary = page.locator("#conversation .item.compact_summary")
    expect(summary).to_be_visible()
    summary.locator("summary").click()
    expect(summary).to_contain_text("SUMMARY: the parser is half done.")


def test_delete_asks_for_confirmation_then_removes_the_session(
    page: Page, console: Console
) -> None:
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "Short-lived"}).json()["id"]
    sign_in(page, then=f"/console/sessions/{session_id}")

    page.get_by_text("Delete this session").click()
    page.get_by_role("button", name="Delete session").click()  # not ticked: the browser refuses
    expect(page).to_have_url(re.compile(re.escape(session_id) + "$"))
    page.get_by_label(re.compile("^Delete the session")).check()
    page.get_by_role("button", name="Delete session").click()

    expect(page).to_have_url(re.compile(r"/console/sessions$"))
    expect(page.get_by_role("link", name="Short-lived")).to_have_count(0)
    with console.api() as api:
        assert api.get(f"/sessions/{session_id}").status_code == 404
