"""The console's rules that need no browser: keyless loopback, sign-in redirects, CSRF on
every change, no private way to the data, nothing in the OpenAPI document, vendored assets."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import httpx

from app.console import auth
from tests.e2e.conftest import REPO_ROOT
from tests.support.apps import serve

CONSOLE = REPO_ROOT / "app" / "console"


def _token(page: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


async def test_on_a_keyless_server_every_page_works_without_signing_in(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/console/sessions", "/console/jobs", "/console/pieces", "/console/webhooks"):
        page = await client.get(path)
        assert page.status_code == 200, (path, page.text[:300])
    sign_in = await client.get("/console/sign-in")
    assert "This server has no API keys" in sign_in.text


async def test_a_form_without_its_csrf_token_changes_nothing(client: httpx.AsyncClient) -> None:
    page = await client.get("/console/sessions")
    token = _token(page)

    missing = await client.post("/console/sessions", data={"title": "no token"})
    forged = await client.post(
        "/console/sessions", data={"title": "forged", "csrf_token": "0" * 64}
    )
    cookieless = await httpx.AsyncClient(
        transport=client._transport, base_url=str(client.base_url)
    ).post("/console/sessions", data={"title": "other site", "csrf_token": token})
    good = await client.post("/console/sessions", data={"title": "mine", "csrf_token": token})

    assert [missing.status_code, forged.status_code, cookieless.status_code] == [403, 403, 403]
    assert good.status_code == 303
    titles = [s["title"] for s in (await client.get("/sessions")).json()["data"]]
    assert titles == ["mine"]


async def test_with_keys_a_page_sends_the_browser_to_sign_in_and_back(
    make_settings: Any,
) -> None:
    settings = make_settings(api_keys="acme:sk_test_console_app", run_worker_in_server=False)
    async with serve(settings) as (_, client):
        page = await client.get("/console/jobs")
        assert page.status_code == 303
        assert page.headers["location"] == "/console/sign-in?next=/console/jobs"
        form = await client.get("/console/sign-in?next=/console/jobs")
        signed = await client.post(
            "/console/sign-in",
            data={
                "csrf_token": _token(form),
                "key": "sk_test_console_app",
                "next": "/console/jobs",
            },
        )
        assert signed.status_code == 303
        assert signed.headers["location"] == "/console/jobs"
        cookie = next(c for c in signed.headers.get_list("set-cookie") if auth.KEY_COOKIE in c)
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert (await client.get("/console/jobs")).status_code == 200
        again = await client.get("/console/sign-in")  # signing in made a new CSRF nonce
        away = await client.post(
            "/console/sign-in",
            data={
                "csrf_token": _token(again),
                "key": "sk_test_console_app",
                "next": "//evil.test/",
            },
        )
        assert away.headers["location"] == "/console/sessions"  # never off the console


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_console_reaches_strata_only_through_the_public_api() -> None:
    # app.domain.jobs: the job statuses the public API speaks, pure (no I/O), so the
    # console's "has it ended" is the server's own set, not a second copy of it; and
    # app.domain.tool_ids, the shape of the tool call ids the API answers (pure), so an id
    # that names a page element has that shape even in a log older than the rewrite; and
    # app.domain.downloads, the one download policy every route serving a file follows
    inside = {
        "app.console",
        "app.settings",
        "app.domain.jobs",
        "app.domain.tool_ids",
        "app.domain.downloads",
    }
    reached = {
        (path.relative_to(REPO_ROOT).as_posix(), name)
        for path in CONSOLE.rglob("*.py")
        for name in _imports(path)
        if name.startswith("app") and not any(name.startswith(p) for p in inside)
    }
    assert reached == set()  # no service, repository, engine, worker or API internals


def test_no_console_route_is_in_the_openapi_document() -> None:
    document = json.loads((REPO_ROOT / "openapi" / "openapi.json").read_text())
    assert [p for p in document["paths"] if p.startswith("/console")] == []


def test_every_asset_is_the_consoles_own_or_vendored_with_its_licence_and_none_from_a_cdn() -> None:
    static = CONSOLE / "static"
    vendored = (static / "VENDORED.txt").read_text()
    for asset in static.iterdir():
        if asset.name != "VENDORED.txt":
            assert asset.name in vendored, asset.name
    assert (static / "htmx.LICENSE.txt").is_file()
    for template in (CONSOLE / "templates").rglob("*.html"):
        for url in re.findall(r'(?:src|href)="([^"]+)"', template.read_text()):
            assert not re.match(r"(https?:)?//", url), (template.name, url)


async def test_the_sessions_page_searches_titles_and_pages_with_the_apis_cursor(
    make_settings: Any,
) -> None:
    settings = make_settings(console_page_size=2, run_worker_in_server=False)
    async with serve(settings) as (_, client):
        for title in ("alpha report", "beta report", "gamma notes"):
            assert (await client.post("/sessions", json={"title": title})).status_code == 201
        first = await client.get("/console/sessions")
        older = re.search(r'href="(/console/sessions\?[^"]*after=[^"]+)" rel="next"', first.text)
        assert older is not None
        second = await client.get(older.group(1).replace("&amp;", "&"))
        found = await client.get("/console/sessions", params={"q": "REPORT", "status": "idle"})

    def titles(page: httpx.Response) -> list[str]:
        return re.findall(r'<a href="/console/sessions/ses_\w+">([^<]+)</a>', page.text)

    assert titles(first) == ["gamma notes", "beta report"]  # newest first, two a page
    assert titles(second) == ["alpha report"]
    assert titles(found) == ["beta report", "alpha report"]


async def test_a_server_with_the_console_off_has_no_console_route(make_settings: Any) -> None:
    settings = make_settings(console_enabled=False, run_worker_in_server=False)
    async with serve(settings) as (_, client):
        assert (await client.get("/console/sessions")).status_code == 404
        assert (await client.get("/sessions")).status_code == 200


async def test_an_ended_jobs_page_offers_no_comment_box(client: httpx.AsyncClient) -> None:
    created = await client.post("/jobs", json={"instruction": "never runs", "start": False})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    draft = await client.get(f"/console/jobs/{job_id}")
    assert 'id="comment-body"' in draft.text
    cancelled = await client.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text

    ended = await client.get(f"/console/jobs/{job_id}")

    assert 'id="comment-body"' not in ended.text
    assert "it takes no more comments" in ended.text
