"""Alembic, driven from code: `strata serve` migrates before serving, `/readyz` compares heads.

The migrations are found in the installed package (`app/db/migrations`, a copy of the
repository's `alembic/` that setup.py puts into every wheel) or, in a source checkout, in
`alembic/` itself, so an installed `strata` migrates from any directory. Processes that
start together (an API and its workers) migrate one after the other instead of racing to
create the same tables: on PostgreSQL under an advisory lock (alembic/env.py), on SQLite
(whose DDL Alembic runs outside a transaction) under a lock on a file beside the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import ensure_sqlite_dir, sync_url

try:
    import fcntl
except ImportError:  # not POSIX: processes there have to be started one after the other
    fcntl = None  # type: ignore[assignment]

PACKAGED_DIR = Path(__file__).resolve().parent / "migrations"
SOURCE_DIR = Path(__file__).resolve().parents[2] / "alembic"


def migrations_dir() -> Path:
    for candidate in (PACKAGED_DIR, SOURCE_DIR):
        if (candidate / "env.py").is_file():
            return candidate
    raise RuntimeError(
        f"Strata's migrations are missing (looked in {PACKAGED_DIR} and {SOURCE_DIR}): "
        "reinstall the package"
    )


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", sync_url(database_url).replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


@contextmanager
def _sqlite_migration_lock(database_url: str) -> Iterator[None]:
    url = make_url(database_url)
    path = url.database if url.get_backend_name() == "sqlite" else None
    if not path or path == ":memory:" or fcntl is None:
        yield
        return
    lock_path = Path(path).expanduser().with_name(Path(path).name + ".migrate-lock")
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def upgrade_to_head(database_url: str) -> None:
    ensure_sqlite_dir(database_url)
    with _sqlite_migration_lock(database_url):
        command.upgrade(alembic_config(database_url), "head")


def downgrade_to_base(database_url: str) -> None:
    command.downgrade(alembic_config(database_url), "base")


def head_revision() -> str | None:
    script = ScriptDirectory(str(migrations_dir()))
    return script.get_current_head()


async def current_revision(db: AsyncSession) -> str | None:
    """The database's migration, or None when it was never migrated."""
    connection = await db.connection()
    if not await connection.run_sync(lambda sync: inspect(sync).has_table("alembic_version")):
        return None
    result = await connection.execute(text("SELECT version_num FROM alembic_version"))
    return result.scalar_one_or_none()
