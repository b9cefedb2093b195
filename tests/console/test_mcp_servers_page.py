"""The MCP servers page in a real browser, against the reference server
(server-everything) over Streamable HTTP on a loopback port: a server added, refreshed
(its tools as the model sees them, with their annotations), deleted; a refresh that
cannot reach its server; a session's tools with their server."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import assert_labelled, sign_in
from tests.support.mcp import HttpServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOKEN = "Bearer never-shown-again"


def test_a_server_added_in_the_console_is_refreshed_to_its_tools_with_their_annotations(
    page: Page, console: Console, everything_http: HttpServer
) -> None:
    sign_in(page, then="/console/mcp-servers")
    assert_labelled(page)
    page.get_by_label(re.compile("^Name")).fill("every")
    page.get_by_label(re.compile("^URL")).fill(everything_http.url())
    page.get_by_label(re.compile("^Headers")).fill(f"Authorization: {TOKEN}")
    page.get_by_label(re.compile("^Call timeout")).fill("20")
    page.get_by_label(re.compile("^Denied tools")).fill("trigger-*")
    page.get_by_label(re.compile("^Trusted")).check()
    page.get_by_role("button", name="Add server").click()

    expect(page.get_by_role("heading", name="MCP server every")).to_be_visible()
    expect(page.locator(".page-head")).to_contain_text("headers Authorization")
    expect(page.locator(".page-head")).to_contain_text("deny trigger-*")
    assert TOKEN not in page.content()  # write-only
    assert_labelled(page)
    page.get_by_role("button", name="Refresh").click()

    echo = page.locator("#mcp-tools tr#tool-mcp__every__echo")
    expect(echo).to_contain_text("Echoes back the input string")
    expect(echo.locator(".annotations .hint")).to_have_text(["idempotentHint", "readOnlyHint"])
    expect(echo.locator(".annotations")).to_contain_text("destructiveHint: false")
    expect(page.locator("#mcp-tools")).not_to_contain_text("mcp__every__trigger-")
    expect(page.locator("#mcp-status")).to_contain_text("no error")


def test_a_server_deleted_in_the_console_leaves_the_list(page: Page, console: Console) -> None:
    with console.api() as api:
        created = api.post("/mcp-servers", json={"name": "doomed", "url": "http://127.0.0.1:9/"})
        assert created.status_code == 201, created.text
    sign_in(page, then="/console/mcp-servers")
    page.get_by_role("link", name="doomed", exact=True).click()

    page.get_by_text("Delete this server").click()
    page.get_by_label(re.compile("^Delete the server")).check()
    page.get_by_role("button", name="Delete server").click()

    expect(page).to_have_url(re.compile(r"/console/mcp-servers$"))
    expect(page.locator("#mcp-server-doomed")).to_have_count(0)
    with console.api() as api:
        assert api.get("/mcp-servers/doomed").status_code == 404


def test_a_refresh_that_cannot_reach_its_server_shows_the_502_and_the_servers_last_error(
    page: Page, console: Console
) -> None:
    with console.api() as api:
        created = api.post("/mcp-servers", json={"name": "nobody", "url": "http://127.0.0.1:9/mcp"})
        assert created.status_code == 201, created.text
    sign_in(page, then="/console/mcp-servers/nobody")
    expect(page.locator("#mcp-status")).to_contain_text("no error")

    page.get_by_role("button", name="Refresh").click()

    problem = page.locator("#refresh-problem")
    expect(problem).to_contain_text("The refresh failed: MCP server unreachable (502)")
    expect(problem).to_contain_text("mcp-unreachable")
    expect(page.locator("#mcp-status .badge")).to_have_text("error")
    page.get_by_role("link", name="MCP servers").click()
    expect(page.locator("#mcp-server-nobody .mcp-error")).not_to_be_empty()


def test_a_sessions_page_lists_its_tools_with_their_server(
    page: Page, console: Console, everything_http: HttpServer
) -> None:
    with console.api() as api:
        added = api.post(
            "/mcp-servers",
            json={"name": "tooly", "url": everything_http.url(), "trusted": True},
        )
        assert added.status_code == 201, added.text
        created = api.post(
            "/sessions",
            json={
                "title": "With tools",
                "tools": ["Read", "mcp__tooly__*"],
                "mcp": [{"server": "tooly", "tools": ["echo"]}],
            },
        )
        assert created.status_code == 201, created.text
        listed = api.get(f"/sessions/{created.json()['id']}/tools").json()["data"]
    echo = next(t for t in listed if t["name"] == "mcp__tooly__echo")
    sign_in(page, then=f"/console/sessions/{created.json()['id']}")

    tools = page.locator("#session-tools")
    tools.get_by_text("Strata's tools").click()
    expect(tools.locator("tr").filter(has_text="Read")).to_contain_text("Strata")
    mcp = tools.locator("tr.mcp")
    expect(mcp).to_have_count(1)  # each tool its server lists now, one row each
    expect(mcp).to_contain_text("mcp__tooly__echo")
    expect(mcp.locator("td").nth(2)).to_contain_text(echo["policy"]["effect"])
    expect(mcp.get_by_role("link", name="tooly")).to_have_attribute(
        "href", "/console/mcp-servers/tooly"
    )
