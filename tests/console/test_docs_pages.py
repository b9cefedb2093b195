"""The API documentation pages in a browser: everything they load comes from the server."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Page, Route, expect

from tests.console.conftest import Console


def _local_only(page: Page, console: Console) -> list[str]:
    """Every request the page makes to another host is refused (nothing leaves the
    machine) and listed."""
    own = urlsplit(console.url).netloc
    elsewhere: list[str] = []

    def handle(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != own:
            elsewhere.append(url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", handle)
    return elsewhere


def test_redoc_loads_nothing_from_another_host(page: Page, console: Console) -> None:
    """ReDoc's page loads nothing from another host: its attribution link stays, without
    the logo upstream ReDoc loads from cdn.redoc.ly (see app/static/README.md)."""
    elsewhere = _local_only(page, console)

    page.goto("/redoc")
    expect(page.get_by_role("link", name="API docs by Redocly")).to_be_visible()
    expect(page.get_by_role("heading", name="Strata", exact=False).first).to_be_visible()
    page.wait_for_load_state("networkidle")

    assert elsewhere == []


def test_swagger_ui_loads_nothing_from_another_host(page: Page, console: Console) -> None:
    elsewhere = _local_only(page, console)

    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Strata")
    page.wait_for_load_state("networkidle")

    assert elsewhere == []
