"""The wheel carries the migrations: `alembic/` is copied into `app/db/migrations/` at build time.

`alembic/` stays at the repository's top level (where `alembic revision` and reviewers expect
it); an installed Strata finds the copy inside its package, a source checkout (editable install)
finds `alembic/` itself (see app/db/migrate.py). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
MIGRATIONS = ROOT / "alembic"
PACKAGED = Path("app", "db", "migrations")


class BuildWithMigrations(build_py):
    """build_py, plus `alembic/{env.py,script.py.mako,versions/*.py}` as package data."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads alembic/ from the source tree
        target = Path(self.build_lib) / PACKAGED
        if target.exists():
            shutil.rmtree(target)
        (target / "versions").mkdir(parents=True)
        for name in ("env.py", "script.py.mako"):
            shutil.copy2(MIGRATIONS / name, target / name)
        for version in sorted((MIGRATIONS / "versions").glob("*.py")):
            shutil.copy2(version, target / "versions" / version.name)


setup(cmdclass={"build_py": BuildWithMigrations})
