"""The pieces page (graphs, YAML, files that failed to load) and the webhooks pages
(subscriptions, deliveries with their attempts, "send test", redelivery, editing, a new
secret) in a real browser."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import assert_labelled, sign_in
from tests.fakes.messages_api import FakeMessagesAPI

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_the_pieces_page_draws_each_piece_shows_its_yaml_and_the_file_that_failed(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    sign_in(page, then="/console/pieces")

    default = page.locator("#piece-default")
    graph = default.locator("svg.piece-graph")
    expect(graph).to_be_visible()
    for movement in ("plan", "work", "review", "COMPLETE"):
        expect(graph.locator("g.node text", has_text=movement).first).to_be_visible()
    expect(default).to_contain_text("review → work")  # the graph's edges, as text too
    default.get_by_text("YAML").click()
    expect(default.locator("pre.yaml")).to_contain_text("initial_movement: plan")
    problems = page.locator("section.problems")
    expect(problems).to_contain_text("broken.yaml")
    expect(problems).to_contain_text("YAML syntax error")


def test_a_subscription_made_in_the_console_lists_the_test_delivery_it_was_sent(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    sign_in(page, then="/console/webhooks")
    assert_labelled(page)
    page.get_by_label("URL").fill("http://127.0.0.1:9/nobody-listens")
    page.get_by_label("Description").fill("console test hook")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_label("Signing secret")).to_have_value(re.compile(r"^whsec_\S+$"))
    page.get_by_role("link", name="http://127.0.0.1:9/nobody-listens").click()
    assert_labelled(page)

    page.get_by_role("button", name="Send test").click()

    delivery = page.locator("#deliveries tbody > tr").first
    expect(delivery).to_contain_text("webhook.test")


def _ended(console: Console, webhook_id: str, attempts: int) -> None:
    """Wait until the subscription's newest delivery has ended after `attempts` tries."""
    with console.api() as api:
        for _ in range(600):
            [newest, *_] = api.get(f"/webhooks/{webhook_id}/deliveries").json()["data"]
            if newest["status"] != "pending" and len(newest["attempts"]) == attempts:
                return
            time.sleep(0.05)
    raise AssertionError(f"the delivery of {webhook_id} never ended after {attempts} tries")


def test_a_subscription_is_edited_its_delivery_sent_again_and_its_secret_rotated(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    with console.api() as api:
        hook = api.post(
            "/webhooks", json={"url": "http://127.0.0.1:9/first", "events": ["job.succeeded"]}
        ).json()
        api.post(f"/webhooks/{hook['id']}/test")
    _ended(console, hook["id"], 1)
    sign_in(page, then=f"/console/webhooks/{hook['id']}")
    assert_labelled(page)

    row = page.locator("#deliveries tbody > tr").first
    expect(row).to_contain_text("failed")
    row.get_by_role("button", name=re.compile("^Redeliver")).click()
    _ended(console, hook["id"], 2)
    page.reload()
    expect(page.locator("#deliveries tbody > tr").first.locator("td").nth(3)).to_have_text("2")

    page.get_by_text("Edit or rotate the secret").click()
    page.get_by_label("URL").fill("http://127.0.0.1:9/second")
    page.get_by_label(re.compile("^Events")).fill("job.succeeded, task.updated")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".page-head")).to_contain_text("http://127.0.0.1:9/second")
    expect(page.locator(".page-head")).to_contain_text("job.succeeded, task.updated")

    page.get_by_text("Edit or rotate the secret").click()
    page.get_by_role("button", name="Rotate the signing secret").click()
    secret = page.get_by_label("Signing secret", exact=True)
    expect(secret).to_have_value(re.compile(r"^whsec_\S+$"))
    assert secret.input_value() != hook["secret"]
