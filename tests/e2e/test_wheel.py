"""The built wheel is all a machine needs: installed into a fresh virtualenv, its `strata`
migrates an empty database, serves, runs a worker and installs the Claude Code kit from a
folder that is not the source tree.

The wheel is built from a copy of what the Dockerfile copies (so nothing else of the checkout
can leak in) and installed with `pip install --no-deps`; its dependencies come from the test
environment's site-packages through a `.pth` line (a plain path: the checkout's editable
install registered there is not loaded), so the test needs no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO_ROOT, StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.chat import new_session

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

# what the Dockerfile's builder stage copies
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "alembic.ini")
BUILD_DIRS = ("alembic", "integrations/claude-code", "app")


def _run(*args: str | Path, cwd: Path) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(REPO_ROOT / name, source / name)
    for name in BUILD_DIRS:
        shutil.copytree(
            REPO_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheels = tmp_path / "wheels"
    _run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--wheel-dir", wheels, source, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = wheels.glob("strata-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
         wheel, cwd=tmp_path)  # fmt: skip
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                     cwd=tmp_path).strip())  # fmt: skip
    (site / "strata-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def test_the_wheel_carries_the_migrations_the_pieces_the_console_and_the_claude_code_kit(
    tmp_path: Path,
) -> None:
    names = set(zipfile.ZipFile(_build_wheel(tmp_path)).namelist())
    versions = sorted(p.name for p in (REPO_ROOT / "alembic" / "versions").glob("*.py"))

    assert {"app/db/migrations/env.py", "app/db/migrations/script.py.mako"} <= names
    assert {f"app/db/migrations/versions/{v}" for v in versions} <= names
    assert "app/pieces/default.yaml" in names
    assert "app/static/swagger-ui/swagger-ui-bundle.js" in names
    console = REPO_ROOT / "app" / "console"
    console_files = {
        p.relative_to(REPO_ROOT).as_posix()
        for folder in ("templates", "static")
        for p in (console / folder).rglob("*")
        if p.is_file()
    }
    assert console_files <= names  # every template and asset of the console
    kit = REPO_ROOT / "integrations" / "claude-code"
    kit_files = {p.relative_to(kit).as_posix() for p in kit.rglob("*") if p.is_file()}
    assert {f"app/integrations/claude-code/{f}" for f in kit_files} <= names


async def test_an_installed_wheel_migrates_serves_and_runs_a_worker_from_any_folder(
    tmp_path: Path,
    empty_database_url: str,
    strata_env: dict[str, str],
    fake_llm: FakeMessagesAPI,
) -> None:
    venv = _fresh_venv(tmp_path, _build_wheel(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in strata_env.items() if k != "PYTHONPATH"}
    env["STRATA_DATABASE_URL"] = empty_database_url  # the installed strata migrates it
    procs = StrataProcesses(env, elsewhere, command=(str(venv / "bin" / "strata"),))
    fake_llm.reply(text("hello from the wheel"))
    try:
        procs.worker("wheel")
        api = procs.serve(run_worker_in_server=False)
        async with api.client(timeout=60.0) as client:
            session_id = await new_session(client)
            answer = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
            )
            located = _run(venv / "bin" / "python", "-c", "import app; print(app.__file__)",
                           cwd=elsewhere)  # fmt: skip
            _run(venv / "bin" / "strata", "claude-code", "install", "--project", elsewhere,
                 cwd=elsewhere)  # fmt: skip
    finally:
        procs.stop_all()

    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == "hello from the wheel"
    assert answer.json()["job"]["attempts"] >= 1
    assert located.startswith(str(venv))
    claude = elsewhere / ".claude"  # the kit came with the wheel, not from a source tree
    assert (claude / "strata" / "strata-hook.py").is_file()
    assert (claude / "commands" / "sc-detail.md").is_file()
    assert "strata-hook.py" in (claude / "settings.json").read_text()
