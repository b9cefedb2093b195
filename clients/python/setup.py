"""Builds `strata_client`: generated from the repository's openapi/openapi.json with
config.yaml (so the client is always the document's), plus the hand-written events.py as
`strata_client.events`. The generator is a build requirement (pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
DOCUMENT = HERE.parents[1] / "openapi" / "openapi.json"


class GenerateClient(build_py):
    def run(self) -> None:
        super().run()
        if not DOCUMENT.is_file():
            raise SystemExit(f"strata-client is built from a checkout: no {DOCUMENT}")
        target = Path(self.build_lib) / "strata_client"
        with tempfile.TemporaryDirectory() as scratch:
            generated = Path(scratch) / "strata_client"
            subprocess.run(
                [
                    sys.executable, "-m", "openapi_python_client", "generate",
                    "--path", str(DOCUMENT), "--config", str(HERE / "config.yaml"),
                    "--meta", "none", "--output-path", str(generated), "--fail-on-warning",
                ],
                cwd=scratch,
                check=True,
            )  # fmt: skip
            shutil.copy2(HERE / "events.py", generated / "events.py")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(generated, target)


class GeneratedPackage(Distribution):
    """Building and installing see a pure package although none is listed: the one
    package is generated while building."""

    def has_pure_modules(self) -> bool:
        return True


setup(distclass=GeneratedPackage, cmdclass={"build_py": GenerateClient})
