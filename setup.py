"""The wheel carries what lives beside the package: `alembic/` is copied into
`app/db/migrations/` and the Claude Code kit (`integrations/claude-code/`) into
`app/integrations/claude-code/` at build time.

Both stay at the repository's top level (where `alembic revision`, Claude Code's plugin loader
and reviewers expect them); an installed Strata finds the copies inside its package, a source
checkout (editable install) finds the originals (app/db/migrate.py, app/claude_code_install.py).
Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
MIGRATIONS = ROOT / "alembic"
PACKAGED = Path("app", "db", "migrations")
KIT = ROOT / "integrations" / "claude-code"
PACKAGED_KIT = Path("app", "integrations", "claude-code")


class BuildWithMigrations(build_py):
    """build_py, plus `alembic/{env.py,script.py.mako,versions/*.py}` and the Claude Code kit
    as package data."""

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
        kit = Path(self.build_lib) / PACKAGED_KIT
        if kit.exists():
            shutil.rmtree(kit)
        shutil.copytree(KIT, kit, ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))


setup(cmdclass={"build_py": BuildWithMigrations})
