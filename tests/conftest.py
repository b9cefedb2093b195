"""Fixtures: every test gets its own database, built by the real migrations.

The schema is migrated once per run into a template; each test gets a copy, so
tests are isolated without paying for `alembic upgrade head` every time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.db.migrate import upgrade_to_head
from app.main import create_app
from app.settings import Settings
from tests.support.tools import agent_tools

pytest_plugins = ["tests.fakes.fixtures"]

_ISOLATED_PREFIXES = ("STRATA_", "ANTHROPIC_")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own keys and URLs never leak into a test."""
    for name in list(os.environ):
        if name.startswith(_ISOLATED_PREFIXES) or name == "PORT":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "strata.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture
def database_url(template_db: Path, tmp_path: Path) -> str:
    path = tmp_path / "strata.db"
    shutil.copyfile(template_db, path)
    return f"sqlite:///{path}"


@pytest.fixture
def make_settings(database_url: str, tmp_path: Path) -> Iterator[Any]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"database_url": database_url, "data_dir": tmp_path / "data"}
        values.update(overrides)
        return Settings(_env_file=None, **values)

    yield make


@pytest.fixture
def settings(make_settings: Any) -> Settings:
    return make_settings()


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
        yield c


@pytest.fixture
def agent_settings(make_settings: Any, fake_llm: Any) -> Settings:
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
    transport = httpx.ASGITransport(app=agent_app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as c:
        yield c
