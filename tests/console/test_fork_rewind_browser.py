"""Fork and rewind in a real browser: fork a turn and land on the fork with its branch
line, rewind with the preview first, see the reverted turn dimmed and labelled yet
readable, and undo the rewind (a rewind to the old head)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import sign_in, wait_live
from tests.fakes.messages_api import FakeMessagesAPI, text

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def _two_turns(console: Console, fake_llm: FakeMessagesAPI, title: str) -> str:
    fake_llm.reply(text("one"))
    fake_llm.reply(text("two"))
    with console.api() as api:
        session_id: str = api.post("/sessions", json={"title": title}).json()["id"]
        for message in ("first", "second"):
            said = api.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
            )
            assert said.status_code == 200, said.text
    return session_id


def test_fork_here_opens_the_fork_which_says_where_it_branched(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    parent = _two_turns(console, fake_llm, "Lyon")
    sign_in(page, then=f"/console/sessions/{parent}")

    page.locator('#timeline li[data-turn="1"]').get_by_role("button", name="Fork here").click()

    expect(page).not_to_have_url(re.compile(rf"/console/sessions/{parent}$"))
    branch = page.locator("#branch")
    expect(branch).to_contain_text(f"Forked from {parent} at turn 1")
    branch.get_by_role("link", name=parent).click()
    expect(page).to_have_url(re.compile(rf"/console/sessions/{parent}$"))


def test_rewind_shows_the_preview_then_flags_the_reverted_turn_and_undo_restores_it(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _two_turns(console, fake_llm, "Rainy")
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)

    page.locator('#timeline li[data-turn="2"]').get_by_role("link", name="Rewind to here").click()
    expect(page.locator("#rewind-turns")).to_contain_text("No turn changes.")
    page.get_by_role("link", name="Cancel").click()
    page.locator('#timeline li[data-turn="1"]').get_by_role("link", name="Rewind to here").click()
    expect(page.locator("#rewind-turns")).to_contain_text("The model stops seeing turn 2.")
    with console.api() as api:  # the preview changed nothing
        assert api.get(f"/sessions/{session_id}").json()["item_count"] == 4
    page.get_by_role("button", name="Rewind").click()

    expect(page).to_have_url(re.compile(rf"/console/sessions/{session_id}$"))
    reverted = page.locator('#timeline li[data-turn="2"]')
    expect(reverted).to_have_class("reverted")
    expect(reverted.locator(".flag")).to_have_text("reverted")
    answer = page.locator('#conversation .item.assistant_message[data-turn="2"]')
    expect(answer).to_have_class(re.compile(r"\breverted\b"))
    expect(answer).to_contain_text("two")  # still readable
    expect(page.locator("#branch")).to_contain_text("Rewound at")

    page.locator("#branch").get_by_role("link", name=re.compile("^Undo")).click()
    expect(page.locator("#rewind-turns")).to_contain_text("The model sees turn 2 again.")
    page.get_by_role("button", name="Rewind").click()

    expect(page).to_have_url(re.compile(rf"/console/sessions/{session_id}$"))
    expect(page.locator('#timeline li[data-turn="2"]')).not_to_have_class("reverted")
    expect(page.locator('#timeline li[data-turn="2"] .flag')).to_have_count(0)
    with console.api() as api:
        turns = api.get(f"/sessions/{session_id}/turns").json()["data"]
    assert [t["turn"] for t in turns if not t["reverted"]] == [2, 1]
