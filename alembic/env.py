"""Alembic environment: synchronous, reading `SQLModel.metadata` and Strata's settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import engine_from_config, pool, text
from sqlmodel import SQLModel

import app.db.models  # noqa: F401  (registers every table)
from app.db.engine import ensure_sqlite_dir, sync_url
from app.db.fulltext import in_models
from app.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name)

if not config.get_main_option("sqlalchemy.url"):
    config.set_main_option("sqlalchemy.url", sync_url(Settings().database_url).replace("%", "%%"))

target_metadata = SQLModel.metadata

# Processes started together (an API and its workers, each running `upgrade head`) take this
# PostgreSQL advisory lock in the migration's transaction, so one migrates and the others then
# find the database at head. SQLite serialises writers by itself.
MIGRATION_LOCK_KEY = 0x5374726174614D67  # "StrataMg"


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or ""
    ensure_sqlite_dir(url)
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            include_object=in_models,  # the full-text index lives beside the models
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"))
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
