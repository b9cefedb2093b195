"""The API keys page in a real browser: a key made (shown once), then revoked."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import assert_labelled, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_key_made_in_the_console_is_shown_once_works_and_is_revoked(
    page: Page, console: Console
) -> None:
    sign_in(page, then="/console/keys")
    assert_labelled(page)

    page.get_by_role("button", name="Create key").click()
    shown = page.get_by_label("API key", exact=True)
    expect(shown).to_have_value(re.compile(r"^sk_strata_\S+$"))
    key = shown.input_value()
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=console.url, headers=headers) as api:
        assert api.get("/api-keys").status_code == 200
        page.goto("/console/keys")
        assert key not in page.content()  # never shown again

        row = page.locator("tbody tr").filter(has_text=key[:14]).first
        expect(row).to_contain_text("active")
        row.get_by_role("button", name=re.compile("^Revoke")).click()
        expect(page.locator("tbody tr").filter(has_text=key[:14]).first).to_contain_text("revoked")
        assert api.get("/api-keys").status_code == 401
