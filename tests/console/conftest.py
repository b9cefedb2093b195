"""The console in a real browser: one `strata serve` with two tenants' keys for the whole run,
and a headless Chromium (the system's, driven by Playwright: no browser download) per test.

The server is started once (session scope: it takes seconds, a browser test a second or two);
every browser test starts Chromium (under a second) and gets a page of its own (its own
cookies: signed out), and at its end a screenshot under `test-artifacts/console/` and the
check that the browser logged no error. The tests share the xdist group `console`, so one
pytest worker runs them all and the server starts once per backend. (The asyncio tests of
this folder that run after the browser tests check that no browser outlives its test.)
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)

from tests.conftest import DatabaseFactory
from tests.e2e.conftest import REPO_ROOT, StrataProcesses, StrataServer, strata_environment
from tests.fakes.messages_api import FakeMessagesAPI

# how long an action or an expectation waits for the page to get there (a bound, not a
# measure: a loaded 2-core machine runs a job's four model calls in seconds)
WAIT_MS = 30_000
expect.set_options(timeout=WAIT_MS)
CHROMIUM = os.environ.get("STRATA_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO_ROOT / "test-artifacts" / "console"
KEY_COOKIE_NAME = "strata_console_key"
KEYS = {"acme": "sk_test_acme_console_key", "globex": "sk_test_globex_console_key"}

# a piece that reads its input, asks the user, and writes its answer
ASK_ONCE = """\
name: ask-once
description: Read the input, ask the user one question, write the answer.
movements:
  - name: answer
    instruction: Read the input files, ask the user what you cannot decide, write output/answer.md.
    allowed_tools: [Read, Write, Glob]
    transitions: [COMPLETE]
"""
# a piece file that cannot load: the pieces page shows it with its error
BROKEN = "name: broken\nmovements: [\n"


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the group into the node id
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.xdist_group("console"))


@dataclass
class Console:
    """The running server, as a person (a browser) and as an SDK user (httpx) reach it."""

    server: StrataServer
    procs: StrataProcesses

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, tenant: str = "acme") -> httpx.Client:
        headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)


@pytest.fixture(scope="session")
def console_messages_api() -> Iterator[FakeMessagesAPI]:
    """The console server's own fake Messages API: the server outlives each test, so it
    never shares the run's fake with the tests of other folders."""
    server = FakeMessagesAPI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_llm(console_messages_api: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    """The console server's fake, reset; every scripted step must be used by the end."""
    console_messages_api.reset()
    yield console_messages_api
    console_messages_api.assert_all_consumed()


@pytest.fixture(scope="session")
def console(
    database_factory: DatabaseFactory,
    console_messages_api: FakeMessagesAPI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Console]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make browser-tools` installs it")
    workdir = tmp_path_factory.mktemp("console")
    pieces = workdir / "pieces"
    pieces.mkdir()
    (pieces / "ask-once.yaml").write_text(ASK_ONCE)
    (pieces / "broken.yaml").write_text(BROKEN)
    database_url = database_factory.migrated(workdir)
    env = strata_environment(console_messages_api.url, database_url, workdir / "data")
    env.update(
        STRATA_API_KEYS=",".join(f"{tenant}:{key}" for tenant, key in KEYS.items()),
        STRATA_PIECES_DIR=str(pieces),
        STRATA_WEBHOOK_ALLOW_PRIVATE="true",
        STRATA_MCP_ALLOW_PRIVATE="true",  # the MCP servers of the tests listen on loopback
        STRATA_WEBHOOK_RETRY_SCHEDULE="0",  # one attempt: a delivery ends at once
    )
    procs = StrataProcesses(env, workdir)
    try:
        yield Console(procs.serve(), procs)
    finally:
        procs.stop_all()
        database_factory.release(database_url)


@pytest.fixture
def browser() -> Iterator[Browser]:
    """A browser for one test. Not shared: Playwright's sync API keeps an event loop
    running in this thread while it is open, and every asyncio test after it on the same
    worker would fail ("cannot be called from a running event loop")."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def artifacts(worker_id: str) -> Path:
    """This run's screenshots, in a folder per backend and xdist worker: the workers'
    session fixtures start together, and two clearing one shared folder at once would fail
    the setup of every console test of one of them (FileNotFoundError)."""
    folder = ARTIFACTS / os.environ.get("STRATA_TEST_DATABASE", "sqlite") / worker_id
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


@dataclass
class BrowserLog:
    """What the page logged as an error, and scripts that failed. A test that opens a page
    answered with an error status on purpose (a 404, a refused key) says so with `allow`:
    Chromium logs every such answer."""

    errors: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, status: int, path: str) -> None:
        self.allowed.append(
            re.compile(rf"status of {status} .*\(https?://[^/]+{re.escape(path)}(\?.*)?\)$")
        )

    def console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        line = f"{message.text} ({message.location.get('url', '')})"
        if not any(pattern.search(line) for pattern in self.allowed):
            self.errors.append(line)

    def page_error(self, error: Any) -> None:
        self.errors.append(f"uncaught: {error}")


@pytest.fixture
def browser_log() -> BrowserLog:
    return BrowserLog()


@pytest.fixture
def page(
    browser: Browser,
    browser_log: BrowserLog,
    console: Console,
    fake_llm: FakeMessagesAPI,
    artifacts: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Page]:
    """A signed-out browser tab on the console; its screenshot is saved at the end, and
    the test fails if the browser logged an error."""
    context: BrowserContext = browser.new_context(
        base_url=console.url, viewport={"width": 1366, "height": 900}
    )
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    log = browser_log
    tab.on("console", log.console)
    tab.on("pageerror", log.page_error)
    try:
        yield tab
    finally:
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", request.node.name)
        tab.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
        context.close()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            sys.stderr.write(console.procs.logs()[-20_000:])
    assert log.errors == [], f"the browser logged errors: {log.errors}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
