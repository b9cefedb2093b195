"""The pieces page (graphs, YAML, files that failed to load) and the webhooks pages
(subscriptions, deliveries with their attempts, "send test") in a real browser."""

from __future__ import annotations

import re

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

    delivery = page.locator("#deliveries li.delivery").first
    expect(delivery).to_contain_text("webhook.test")
