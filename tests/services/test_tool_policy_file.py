"""`strata serve` and `strata worker` refuse to start on an operator's tool policy file
that cannot be read or holds a bad rule, naming the rule: a process that started without
it would run calls the operator meant to hold or refuse."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.cli import main
from app.settings import get_settings


@pytest.fixture
def bad_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A policy file whose second rule names no tool, through the environment; the
    database is one that must never be reached."""
    path = tmp_path / "policy.json"
    rules = [{"tool": "Bash", "effect": "ask"}, {"tool": "Bsah", "effect": "deny"}]
    path.write_text(json.dumps(rules), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STRATA_TOOL_POLICY_FILE", str(path))
    monkeypatch.setenv("STRATA_DATABASE_URL", f"sqlite:///{tmp_path / 'never' / 'x.db'}")
    monkeypatch.setenv("STRATA_DATA_DIR", str(tmp_path / "data"))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()
    root.handlers[:], root.level = handlers, level  # undo the command's logging setup


def test_serve_refuses_a_policy_file_with_a_bad_rule_and_names_it(
    bad_policy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))

    assert main(["serve"]) == 2

    err = capsys.readouterr().err
    assert f"refusing to start: STRATA_TOOL_POLICY_FILE {bad_policy}: rules[1].tool" in err
    assert served == []
    assert not (bad_policy.parent / "never").exists()


def test_a_worker_refuses_a_policy_file_with_a_bad_rule(
    bad_policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker"]) == 2

    assert "rules[1].tool: 'Bsah' names no tool" in capsys.readouterr().err
