"""Memory search in a real browser: the session page's search box and the tenant-wide page
in the nav find a turn by its words, and a hit opens that turn's details."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import assert_labelled, sign_in
from tests.fakes.messages_api import FakeMessagesAPI, text

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def _session_that_said(console: Console, fake_llm: FakeMessagesAPI, words: str) -> str:
    fake_llm.reply(text("Noted: the parser it is."))
    with console.api() as api:
        session_id: str = api.post("/sessions", json={"title": "Search me"}).json()["id"]
        answered = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": words}
        )
        assert answered.status_code == 200, answered.text
    return session_id


def test_a_word_searched_on_the_memory_panel_opens_its_turns_details(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _session_that_said(console, fake_llm, "rename the quokka parser")
    sign_in(page, then=f"/console/sessions/{session_id}")

    page.get_by_label("Words").fill("quokka")
    page.get_by_label("Words").press("Enter")
    hit = page.locator("#search-result .search-hits li")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("rename the quokka parser")
    assert_labelled(page)
    hit.get_by_role("link").click()

    found = page.locator("#detail-result article.detail-turn")
    expect(found).to_have_count(1)
    expect(found.locator(".l2")).to_contain_text("Noted: the parser it is.")


def test_the_memory_page_in_the_nav_searches_every_session(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    _session_that_said(console, fake_llm, "the wombat migration plan")
    sign_in(page)

    page.get_by_role("navigation", name="Console").get_by_role("link", name="Memory").click()
    page.get_by_label("Words").fill("wombat")
    page.get_by_role("button", name="Search").click()

    hit = page.locator(".search-hits li")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("the wombat migration plan")
    assert_labelled(page)
    hit.get_by_role("link").click()
    expect(page.locator("#detail-result article.detail-turn .l2")).to_contain_text("wombat")
