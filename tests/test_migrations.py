"""The migrations are the schema: they run both ways and match the SQLModel tables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text
from sqlmodel import SQLModel

import app.db.models  # noqa: F401  (registers every table on SQLModel.metadata)
from app.db.engine import Database
from app.db.migrate import downgrade_to_base, head_revision, upgrade_to_head
from app.settings import Settings

APPLICATION_TABLES = {"api_keys", "items", "sessions"}


@pytest.fixture
def fresh_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fresh.db'}"


@pytest.fixture
def sync_engine(fresh_url: str) -> Iterator[Engine]:
    engine = create_engine(fresh_url)
    yield engine
    engine.dispose()


def table_names(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def schema_differences(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, SQLModel.metadata))


def test_upgrade_creates_every_table_at_head(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)

    assert APPLICATION_TABLES <= table_names(sync_engine)
    with sync_engine.connect() as connection:
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert version == head_revision()


def test_downgrade_to_base_leaves_no_application_tables(
    fresh_url: str, sync_engine: Engine
) -> None:
    upgrade_to_head(fresh_url)

    downgrade_to_base(fresh_url)

    assert table_names(sync_engine) <= {"alembic_version"}


def test_upgrade_works_again_after_downgrade(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)
    downgrade_to_base(fresh_url)

    upgrade_to_head(fresh_url)

    assert APPLICATION_TABLES <= table_names(sync_engine)
    assert schema_differences(sync_engine) == []


def test_models_match_the_migrations(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)

    assert schema_differences(sync_engine) == []


async def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(
    fresh_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        _env_file=None,
        database_url=fresh_url,
        data_dir=tmp_path / "data",
        sqlite_busy_timeout_ms=4321,
    )
    database = Database(settings)
    try:
        async with database.session(write=False) as db:
            connection = await db.connection()
            journal_mode = (await connection.execute(text("PRAGMA journal_mode"))).scalar()
            foreign_keys = (await connection.execute(text("PRAGMA foreign_keys"))).scalar()
            busy_timeout = (await connection.execute(text("PRAGMA busy_timeout"))).scalar()
    finally:
        await database.dispose()

    assert journal_mode == "wal"
    assert foreign_keys == 1
    assert busy_timeout == 4321
