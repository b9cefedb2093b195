"""`strata` in-process: serve refuses an open address without keys, keys are stored hashed."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from app.cli import main
from app.main import create_app
from app.settings import Settings, get_settings


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh SQLite file through the environment, as an operator would configure it."""
    path = tmp_path / "cli" / "strata.db"
    monkeypatch.chdir(tmp_path)  # no developer `.env` is read, relative paths stay here
    monkeypatch.setenv("STRATA_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("STRATA_DATA_DIR", str(tmp_path / "data"))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()
    root.handlers[:], root.level = handlers, level  # undo `strata serve`'s logging setup


@pytest.fixture
def uvicorn_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """Records `uvicorn.run` instead of serving."""
    calls: list[tuple[Any, dict[str, Any]]] = []

    def run(app: Any, **kwargs: Any) -> None:
        calls.append((app, kwargs))

    monkeypatch.setattr(uvicorn, "run", run)
    return calls


def _create_key(capsys: pytest.CaptureFixture[str], tenant: str = "acme") -> str:
    assert main(["keys", "create", "--tenant", tenant]) == 0
    key = capsys.readouterr().out.strip()
    get_settings.cache_clear()
    return key


def _database_text(path: Path) -> str:
    """Every value of every table, as text."""
    values: list[str] = []
    with closing(sqlite3.connect(path)) as connection:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        for (table,) in connection.execute(query).fetchall():
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                values.extend(str(value) for value in row)
    return "\n".join(values)


# --- serve ---------------------------------------------------------------------


def test_serve_refuses_an_open_address_without_keys(
    db_path: Path, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2

    captured = capsys.readouterr()
    assert "refusing to listen on 0.0.0.0" in captured.err
    assert "strata keys create" in captured.err
    assert "STRATA_API_KEYS" in captured.err
    assert captured.out == ""
    assert uvicorn_calls == []


def test_serve_refuses_host_from_the_environment_too(
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    uvicorn_calls: list[Any],
) -> None:
    monkeypatch.setenv("STRATA_HOST", "192.168.1.5")

    assert main(["serve"]) == 2

    assert "refusing to listen on 192.168.1.5" in capsys.readouterr().err
    assert uvicorn_calls == []


def test_serve_on_loopback_without_keys_serves_the_local_tenant(
    db_path: Path, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    assert main(["serve"]) == 0

    ((app, kwargs),) = uvicorn_calls
    assert isinstance(app, FastAPI)
    assert (kwargs["host"], kwargs["port"]) == ("127.0.0.1", 8000)
    assert "no API key configured" in capsys.readouterr().err
    assert db_path.is_file()  # migrated before serving


def test_serve_on_an_open_address_with_a_stored_key(
    db_path: Path, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    _create_key(capsys)

    assert main(["serve", "--host", "0.0.0.0", "--port", "9123"]) == 0

    ((app, kwargs),) = uvicorn_calls
    assert isinstance(app, FastAPI)
    assert (kwargs["host"], kwargs["port"]) == ("0.0.0.0", 9123)
    assert app.state.settings.host == "0.0.0.0"
    assert app.state.settings.port == 9123


def test_serve_on_an_open_address_with_a_configured_key(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, uvicorn_calls: list[Any]
) -> None:
    monkeypatch.setenv("STRATA_API_KEYS", "acme:sha256:" + "ab" * 32)
    monkeypatch.setenv("PORT", "9124")

    assert main(["serve", "--host", "0.0.0.0"]) == 0

    ((_, kwargs),) = uvicorn_calls
    assert (kwargs["host"], kwargs["port"]) == ("0.0.0.0", 9124)


# --- keys ------------------------------------------------------------------------


def test_keys_create_prints_the_key_and_stores_only_its_hash(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--tenant", "acme"]) == 0

    captured = capsys.readouterr()
    key = captured.out.strip()
    assert key.startswith("sk_strata_")
    assert len(key) > len("sk_strata_") + 32
    assert captured.out == key + "\n"  # nothing else on stdout, so `$(strata keys create)` works
    assert key not in captured.err
    assert "acme" in captured.err

    with closing(sqlite3.connect(db_path)) as connection:
        rows = connection.execute("SELECT tenant, key_hash FROM api_keys").fetchall()
    assert rows == [("acme", hashlib.sha256(key.encode()).hexdigest())]
    stored = _database_text(db_path)
    assert rows[0][1] in stored  # the scan does see the table
    assert key not in stored
    for file in db_path.parent.iterdir():  # the database and any WAL/journal beside it
        assert key.encode() not in file.read_bytes(), file.name


def test_keys_create_gives_a_new_key_each_time(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _create_key(capsys)
    second = _create_key(capsys)

    assert first != second
    with closing(sqlite3.connect(db_path)) as connection:
        (count,) = connection.execute("SELECT count(*) FROM api_keys").fetchone()
    assert count == 2


def test_keys_create_rejects_a_bad_tenant_name(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--tenant", "bad name!"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tenant" in captured.err
    with closing(sqlite3.connect(db_path)) as connection:
        assert connection.execute("SELECT count(*) FROM api_keys").fetchone() == (0,)


def test_keys_create_needs_a_tenant(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["keys", "create"])

    assert exit_info.value.code == 2
    assert "--tenant" in capsys.readouterr().err


# --- openapi ------------------------------------------------------------


def test_openapi_writes_the_apps_document(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out" / "openapi.json"

    assert main(["openapi", "-o", str(output)]) == 0

    document = json.loads(output.read_text(encoding="utf-8"))
    assert document == create_app(Settings(_env_file=None)).openapi()
    assert capsys.readouterr().out == ""


def test_openapi_to_stdout(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["openapi", "-o", "-"]) == 0

    document = json.loads(capsys.readouterr().out)
    assert document == create_app(Settings(_env_file=None)).openapi()


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])

    assert exit_info.value.code == 2
    assert "usage: strata" in capsys.readouterr().err
