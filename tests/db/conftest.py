"""Fixtures of the migration tests: a never-migrated database and a plain engine on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine

from app.db.engine import sync_url


@pytest.fixture
def fresh_url(empty_database_url: str) -> str:
    """A never-migrated database on the backend under test."""
    return empty_database_url


@pytest.fixture
def sync_engine(fresh_url: str) -> Iterator[Engine]:
    engine = create_engine(sync_url(fresh_url))
    yield engine
    engine.dispose()
