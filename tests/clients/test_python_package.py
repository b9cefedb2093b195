"""`pip install clients/python` gives a fresh virtualenv the `strata-client` package: the
client generated from openapi/openapi.json and its hand-written `strata_client.events`.

The package is installed as a user would, with build isolation: pip fetches the build
requirements (setuptools, openapi-python-client) and the dependencies from the machine's
configured index, which for the test suite is a local one (no network). What is built is a
copy of clients/python and the document beside it, as a checkout lays them out, so nothing
else of the checkout can leak in and no build folder is left in it.

Marked `sqlite_only`: no database is involved.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only, pytest.mark.timeout(600)]

INSTALL_WITHIN = 540.0  # seconds; about 30 s on an idle machine
IMPORTS = """
import importlib.metadata as metadata
import strata_client
from strata_client.api.sessions import sessions_create
from strata_client.events import stream
from strata_client.models import TextDelta
print(metadata.version("strata-client"), strata_client.AuthenticatedClient.__name__)
"""


def _run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=INSTALL_WITHIN,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr[-5000:]}"
    return done.stdout


def test_pip_installs_the_client_package_into_a_fresh_virtualenv_and_it_imports(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO_ROOT / "clients" / "python",
        checkout / "clients" / "python",
        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "strata_client"),
    )
    (checkout / "openapi").mkdir()
    shutil.copy2(REPO_ROOT / "openapi" / "openapi.json", checkout / "openapi" / "openapi.json")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"

    _run(python, "-m", "pip", "install", "--quiet", checkout / "clients" / "python", cwd=tmp_path)

    assert _run(python, "-c", IMPORTS, cwd=tmp_path).split() == ["0.1.0", "AuthenticatedClient"]
