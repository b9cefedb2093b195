"""What a person does on the console, as steps the browser tests share."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.conftest import KEYS

# every form control with no label a screen reader would announce (a <label for>, an
# enclosing label, aria-label or aria-labelledby; a button's own text)
UNLABELLED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button')].filter((el) => {
  if (el.tagName === 'BUTTON') return !el.textContent.trim() && !el.getAttribute('aria-label');
  return el.labels.length === 0 && !el.getAttribute('aria-label')
    && !el.getAttribute('aria-labelledby');
}).map((el) => el.outerHTML.slice(0, 160))"""


def assert_labelled(page: Page) -> None:
    """Every form control of the page has a label."""
    assert page.evaluate(UNLABELLED) == []


def sign_in(page: Page, tenant: str = "acme", then: str = "/console/sessions") -> None:
    """Open `then`, land on the sign-in page, and sign in with the keyboard alone."""
    page.goto(then)
    expect(page).to_have_url(re.compile(r"/console/sign-in\?next="))
    assert_labelled(page)
    expect(page.locator("#key")).to_be_focused()  # the key field has the focus at once
    page.keyboard.type(KEYS[tenant])
    page.keyboard.press("Enter")
    # the whole path: the sign-in page's own URL ends with `then` too (`?next=…`)
    expect(page).to_have_url(re.compile(r"^https?://[^/]+" + re.escape(then) + "$"))


def tab_to(page: Page, selector: str, *, presses: int = 60) -> None:
    """Press Tab until the element `selector` has the focus (the page is keyboard
    navigable up to it)."""
    target = page.locator(selector)
    for _ in range(presses):
        page.keyboard.press("Tab")
        if target.evaluate("(el) => el === document.activeElement"):
            return
    raise AssertionError(f"{selector} never got the focus in {presses} Tab presses")


def wait_live(page: Page) -> None:
    """The page's live stream is open: nothing the server sends from now on is missed."""
    expect(page.locator("#live-status")).to_have_text("live")


def mark_page(page: Page) -> None:
    """Mark this document: `assert_not_reloaded` fails once another one replaced it."""
    page.evaluate("() => { window.__consoleTestMark = true; }")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("() => window.__consoleTestMark === true")


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text blocks of the last user message of a request the fake got."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    content = last["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]
