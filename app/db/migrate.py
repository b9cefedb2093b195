"""Alembic, driven from code: `strata serve` migrates before serving, `/readyz` compares heads."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import ensure_sqlite_dir, sync_url

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ALEMBIC_DIR = PROJECT_ROOT / "alembic"


def alembic_config(database_url: str) -> Config:
    if not ALEMBIC_DIR.is_dir():
        raise RuntimeError(
            f"migrations not found at {ALEMBIC_DIR}; run Strata from its source tree"
        )
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    config.set_main_option("sqlalchemy.url", sync_url(database_url).replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def upgrade_to_head(database_url: str) -> None:
    ensure_sqlite_dir(database_url)
    command.upgrade(alembic_config(database_url), "head")


def downgrade_to_base(database_url: str) -> None:
    command.downgrade(alembic_config(database_url), "base")


def head_revision() -> str | None:
    script = ScriptDirectory(str(ALEMBIC_DIR))
    return script.get_current_head()


async def current_revision(db: AsyncSession) -> str | None:
    """The database's migration, or None when it was never migrated."""
    connection = await db.connection()
    if not await connection.run_sync(lambda sync: inspect(sync).has_table("alembic_version")):
        return None
    result = await connection.execute(text("SELECT version_num FROM alembic_version"))
    return result.scalar_one_or_none()
