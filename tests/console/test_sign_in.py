"""Signing in to the console with an API key, and out, in a real browser."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import KEY_COOKIE_NAME, BrowserLog, Console
from tests.console.pages import assert_labelled, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_wrong_key_is_refused_on_the_sign_in_page(
    page: Page, console: Console, browser_log: BrowserLog
) -> None:
    browser_log.allow(401, "/console/sign-in")
    page.goto("/console/sign-in")
    page.get_by_label("API key").fill("sk_strata_not_a_key")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert").filter(has_text="not valid")).to_be_visible()
    assert [c for c in page.context.cookies() if c["name"] == KEY_COOKIE_NAME] == []


def test_the_key_is_kept_in_an_httponly_strict_cookie_of_the_console_until_sign_out(
    page: Page, console: Console
) -> None:
    sign_in(page, "acme", then="/console/jobs")

    (cookie,) = [c for c in page.context.cookies() if c["name"] == KEY_COOKIE_NAME]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/console"
    assert page.evaluate("() => document.cookie") == ""  # no script can read it
    assert_labelled(page)

    page.get_by_role("button", name="Sign out").click()

    expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    assert [c for c in page.context.cookies() if c["name"] == KEY_COOKIE_NAME] == []
    page.goto("/console/sessions")
    expect(page).to_have_url(re.compile(r"/console/sign-in\?next=/console/sessions$"))
