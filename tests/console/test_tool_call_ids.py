"""A tool call id crafted to break out of the console's markup, in a real browser: the page
stays whole and nothing it held reaches the page as an element."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import sign_in, wait_live
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

# closes the live fragment's wrapper and opens one that appends to the conversation
CRAFTED = (
    'toolu_x"></div><div hx-swap-oob="beforeend:#conversation">'
    '<b id="injected">injected</b></div><div title="'
)


def test_a_tool_call_id_with_a_quote_leaves_the_page_whole_and_injects_no_element(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "Crafted id"}).json()["id"]
    fake_llm.reply(tool_use("TaskList", {}, id=CRAFTED))
    fake_llm.reply(text("The list is empty."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)

    page.get_by_label("Message", exact=False).fill("list the tasks")
    page.get_by_role("button", name="Send").click()

    answer = page.locator("#conversation .item.assistant_message").filter(
        has_text="The list is empty."
    )
    expect(answer).to_be_visible()  # the stream went on past the call
    call = page.locator("#conversation details.tool").filter(has_text="TaskList")
    result = call.locator(".tool-result")
    expect(result).to_contain_text("The task list is empty.")  # its result, in its call
    expect(page.locator("#injected")).to_have_count(0)
    page.reload()  # and the page rendered whole from the log
    expect(answer).to_be_visible()
    expect(result).to_contain_text("The task list is empty.")
    expect(page.locator("#injected")).to_have_count(0)
