"""The console shows a tenant its own data only: another tenant's key sees none of it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import BrowserLog, Console
from tests.console.pages import sign_in
from tests.fakes.messages_api import FakeMessagesAPI

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TITLE = "Acme's secret merger plans"


def test_a_second_tenants_key_sees_none_of_the_first_tenants_sessions_and_jobs(
    page: Page, console: Console, fake_llm: FakeMessagesAPI, browser_log: BrowserLog
) -> None:
    with console.api("acme") as api:
        session_id = api.post("/sessions", json={"title": TITLE}).json()["id"]
        job = api.post(
            "/jobs", json={"instruction": "Acme draft work", "piece": "ask-once", "start": False}
        ).json()
    session_path, job_path = f"/console/sessions/{session_id}", f"/console/jobs/{job['id']}"
    browser_log.allow(404, session_path)
    browser_log.allow(404, job_path)

    sign_in(page, "globex")
    expect(page.locator("main")).not_to_contain_text(TITLE)
    page.get_by_label("Title contains").fill("merger")
    page.get_by_label("Title contains").press("Enter")
    expect(page.locator("main")).to_contain_text("No session matches")
    page.goto("/console/jobs")
    expect(page.locator("main")).not_to_contain_text("Acme draft work")

    page.goto(session_path)
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text(TITLE)
    page.goto(job_path)
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("Acme draft work")
