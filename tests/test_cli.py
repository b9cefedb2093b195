"""`strata` in-process: serve refuses an open address without keys, keys are stored hashed.

Each test points `STRATA_DATABASE_URL` at a never-migrated database of the backend under test."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import NullPool, create_engine, inspect, text
from sqlalchemy.engine import make_url

from app.cli import main
from app.db.engine import sync_url
from app.db.migrate import head_revision
from app.db.types import utcnow
from app.main import create_app
from app.observability import gc_tuning
from app.settings import Settings, get_settings
from tests.support.apps import IN_PROCESS_HOSTS, serve


@pytest.fixture
def db_url(
    empty_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A never-migrated database through the environment, as an operator would configure it
    (a SQLite file that does not exist yet, or an empty PostgreSQL database)."""
    monkeypatch.chdir(tmp_path)  # no developer `.env` is read, relative paths stay here
    monkeypatch.setenv("STRATA_DATABASE_URL", empty_database_url)
    monkeypatch.setenv("STRATA_DATA_DIR", str(tmp_path / "data"))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    get_settings.cache_clear()
    yield empty_database_url
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


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(sync_url(url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


def _database_text(url: str) -> str:
    """Every value of every table, as text."""
    engine = create_engine(sync_url(url), poolclass=NullPool)
    values: list[str] = []
    try:
        with engine.connect() as connection:
            for table in inspect(connection).get_table_names():
                for row in connection.execute(text(f'SELECT * FROM "{table}"')):
                    values.extend(str(value) for value in row)
    finally:
        engine.dispose()
    return "\n".join(values)


# --- serve ---------------------------------------------------------------------


def test_serve_refuses_an_open_address_without_keys(
    db_url: str, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2

    captured = capsys.readouterr()
    assert "refusing to listen on 0.0.0.0" in captured.err
    assert "strata keys create" in captured.err
    assert "STRATA_API_KEYS" in captured.err
    assert captured.out == ""
    assert uvicorn_calls == []


def test_serve_refuses_host_from_the_environment_too(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    uvicorn_calls: list[Any],
) -> None:
    monkeypatch.setenv("STRATA_HOST", "192.168.1.5")

    assert main(["serve"]) == 2

    assert "refusing to listen on 192.168.1.5" in capsys.readouterr().err
    assert uvicorn_calls == []


def test_serve_on_loopback_without_keys_serves_the_local_tenant(
    db_url: str, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    assert main(["serve"]) == 0

    ((app, kwargs),) = uvicorn_calls
    assert isinstance(app, FastAPI)
    assert (kwargs["host"], kwargs["port"]) == ("127.0.0.1", 8000)
    assert "no API key configured" in capsys.readouterr().err
    assert _query(db_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


def test_serve_names_a_variable_no_setting_reads_with_the_one_it_may_mean(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    uvicorn_calls: list[Any],
) -> None:
    monkeypatch.setenv("STRATA_TENANT_MAX_ACTIVE_JOB", "3")

    assert main(["serve"]) == 0

    err = capsys.readouterr().err
    assert "STRATA_TENANT_MAX_ACTIVE_JOB is not a setting of Strata and is ignored" in err
    assert "did you mean STRATA_TENANT_MAX_ACTIVE_JOBS?" in err


def test_serve_says_nothing_of_the_variables_it_reads(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    uvicorn_calls: list[Any],
) -> None:
    monkeypatch.setenv("STRATA_TENANT_MAX_ACTIVE_JOBS", "3")
    monkeypatch.setenv("STRATA_URL", "http://127.0.0.1:8000")

    assert main(["serve"]) == 0

    assert "is not a setting of Strata" not in capsys.readouterr().err


class _Tuned(Exception):
    """Raised by a stand-in `tune_gc`: the process got that far."""


def test_serve_tunes_the_garbage_collector_before_it_serves(
    db_url: str, monkeypatch: pytest.MonkeyPatch, uvicorn_calls: list[Any]
) -> None:
    tuned: list[int] = []
    monkeypatch.setattr(gc_tuning, "tune_gc", lambda _settings: tuned.append(len(uvicorn_calls)))

    assert main(["serve"]) == 0

    assert tuned == [0]  # once, before uvicorn ran


@pytest.mark.timeout(30)  # without the call the worker would wait for a signal
def test_a_worker_tunes_the_garbage_collector_once_its_runtime_started(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tune(_settings: Any) -> None:
        raise _Tuned

    monkeypatch.setattr(gc_tuning, "tune_gc", tune)

    with pytest.raises(_Tuned):
        main(["worker"])


def test_serve_on_an_open_address_with_a_stored_key(
    db_url: str, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    _create_key(capsys)

    assert main(["serve", "--host", "0.0.0.0", "--port", "9123"]) == 0

    ((app, kwargs),) = uvicorn_calls
    assert isinstance(app, FastAPI)
    assert (kwargs["host"], kwargs["port"]) == ("0.0.0.0", 9123)
    assert app.state.settings.host == "0.0.0.0"
    assert app.state.settings.port == 9123


def test_serve_answers_under_the_address_it_binds_and_refuses_other_names(
    db_url: str, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    _create_key(capsys)
    assert main(["serve", "--host", "192.0.2.10"]) == 0
    ((app, _),) = uvicorn_calls

    async def health(host: str) -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            return (await client.get("/healthz")).status_code

    assert asyncio.run(health("192.0.2.10:8000")) == 200
    assert asyncio.run(health("evil.example")) == 403


def test_serve_on_an_open_address_without_allowed_hosts_says_which_names_it_answers(
    db_url: str, capsys: pytest.CaptureFixture[str], uvicorn_calls: list[Any]
) -> None:
    _create_key(capsys)

    assert main(["serve", "--host", "0.0.0.0"]) == 0

    assert "list its public names in STRATA_ALLOWED_HOSTS" in capsys.readouterr().err


def test_serve_on_an_open_address_with_a_configured_key(
    db_url: str, monkeypatch: pytest.MonkeyPatch, uvicorn_calls: list[Any]
) -> None:
    monkeypatch.setenv("STRATA_API_KEYS", "acme:sha256:" + "ab" * 32)
    monkeypatch.setenv("PORT", "9124")

    assert main(["serve", "--host", "0.0.0.0"]) == 0

    ((_, kwargs),) = uvicorn_calls
    assert (kwargs["host"], kwargs["port"]) == ("0.0.0.0", 9124)


# --- keys ------------------------------------------------------------------------


def test_keys_create_prints_the_key_and_stores_only_its_hash(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--tenant", "acme"]) == 0

    captured = capsys.readouterr()
    key = captured.out.strip()
    assert key.startswith("sk_strata_")
    assert len(key) > len("sk_strata_") + 32
    assert captured.out == key + "\n"  # nothing else on stdout, so `$(strata keys create)` works
    assert key not in captured.err
    assert "acme" in captured.err

    rows = _query(db_url, "SELECT tenant, key_hash FROM api_keys")
    assert rows == [("acme", hashlib.sha256(key.encode()).hexdigest())]
    stored = _database_text(db_url)
    assert rows[0][1] in stored  # the scan does see the table
    assert key not in stored


@pytest.mark.sqlite_only
def test_keys_create_leaves_the_key_in_no_file_of_the_database(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _create_key(capsys)

    database = Path(make_url(db_url).database or "")
    assert database.is_file()
    for file in database.parent.iterdir():  # the database and any WAL/journal beside it
        assert key.encode() not in file.read_bytes(), file.name


def test_keys_create_gives_a_new_key_each_time(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _create_key(capsys)
    second = _create_key(capsys)

    assert first != second
    assert _query(db_url, "SELECT count(*) FROM api_keys") == [(2,)]


def test_keys_create_rejects_a_bad_tenant_name(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--tenant", "bad name!"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tenant" in captured.err
    assert _query(db_url, "SELECT count(*) FROM api_keys") == [(0,)]


def test_keys_create_needs_a_tenant(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["keys", "create"])

    assert exit_info.value.code == 2
    assert "--tenant" in capsys.readouterr().err


def _key_rows(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    assert main(["keys", "list"]) == 0
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header.split("\t") == ["id", "tenant", "prefix", "created", "expires", "state"]
    return [row.split("\t") for row in rows]


def _status_with(key: str) -> int:
    """What a server of these settings answers to a request with this key."""
    get_settings.cache_clear()

    async def ask() -> int:
        settings = get_settings().model_copy(update={"allowed_hosts": IN_PROCESS_HOSTS})
        async with serve(settings) as (_, client):
            response = await client.get("/sessions", headers={"authorization": f"Bearer {key}"})
        return response.status_code

    return asyncio.run(ask())


def test_keys_list_shows_each_stored_key_without_the_key(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _create_key(capsys, "acme")
    _create_key(capsys, "beta")

    rows = _key_rows(capsys)

    assert [(row[1], row[4], row[5]) for row in rows] == [
        ("acme", "never", "active"),
        ("beta", "never", "active"),
    ]
    assert all(row[0].startswith("key_") for row in rows)
    assert rows[0][2] == key[: len("sk_strata_") + 4] + "…"
    assert all(key not in "\t".join(row) for row in rows)


def test_a_revoked_key_is_refused_and_listed_as_revoked(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _create_key(capsys)
    ((key_id, *_),) = _key_rows(capsys)
    assert _status_with(key) == 200

    assert main(["keys", "revoke", key_id]) == 0

    assert _status_with(key) == 401
    assert _key_rows(capsys)[0][5] == "revoked"
    assert _status_with("sk_strata_no_key_at_all") == 401  # still keyed: never opens up


def test_revoking_an_unknown_key_fails(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "revoke", "key_unknown"]) == 2

    assert "no API key 'key_unknown'" in capsys.readouterr().err


def test_a_key_with_an_expiry_works_until_then(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["keys", "create", "--tenant", "acme", "--expires-in", "2h"]) == 0
    key = capsys.readouterr().out.strip()
    ((_, _, _, _, expires, state),) = _key_rows(capsys)
    assert (expires != "never", state) == (True, "active")
    assert _status_with(key) == 200

    later = utcnow() + timedelta(hours=3)
    monkeypatch.setattr("app.services.auth.utcnow", lambda: later)

    assert _status_with(key) == 401


def test_keys_create_refuses_a_malformed_expiry(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["keys", "create", "--tenant", "acme", "--expires-in", "soon"])

    assert "not a duration" in capsys.readouterr().err


def test_migrate_brings_an_empty_database_to_head(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0

    assert _query(db_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    assert head_revision() in capsys.readouterr().err  # type: ignore[operator]


# --- openapi ------------------------------------------------------------


def test_openapi_writes_the_apps_document(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out" / "openapi.json"

    assert main(["openapi", "-o", str(output)]) == 0

    document = json.loads(output.read_text(encoding="utf-8"))
    assert document == create_app(Settings(_env_file=None)).openapi()
    assert capsys.readouterr().out == ""


def test_openapi_to_stdout(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["openapi", "-o", "-"]) == 0

    document = json.loads(capsys.readouterr().out)
    assert document == create_app(Settings(_env_file=None)).openapi()


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])

    assert exit_info.value.code == 2
    assert "usage: strata" in capsys.readouterr().err


def test_processes_started_together_migrate_an_empty_database_one_after_the_other(
    db_url: str,
) -> None:
    """An API and its workers each run `upgrade head` at start-up (as in compose.yaml):
    none may fail on a table another one just created."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "migrate"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(proc.returncode, proc.communicate(timeout=120)[1]) for proc in procs]
    results = [(proc.returncode, err) for proc, (_, err) in zip(procs, results, strict=True)]

    assert [code for code, _ in results] == [0, 0, 0], [err[-2000:] for _, err in results]
    assert _query(db_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


# --- strata claude-code install ----------------------------------------------------------


def _install(*args: str) -> int:
    return main(["claude-code", "install", *args])


def test_install_for_a_project_merges_the_hooks_without_clobbering_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = tmp_path / ".claude"
    claude.mkdir()
    theirs = {"type": "command", "command": "./lint.sh"}
    before = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test:*)"]},
        "env": {"FOO": "1", "STRATA_URL": "http://strata.internal:8000"},
        "hooks": {
            "Stop": [
                {"hooks": [theirs]},
                {"hooks": [{"type": "command", "command": "python3 ~/.claude/strata-hook.py"}]},
            ]
        },
    }
    (claude / "settings.json").write_text(json.dumps(before))

    assert _install("--project", str(tmp_path)) == 0

    printed = capsys.readouterr().out
    after = json.loads((claude / "settings.json").read_text())
    script = claude / "strata" / "strata-hook.py"
    command = 'python3 "$CLAUDE_PROJECT_DIR/.claude/strata/strata-hook.py"'
    assert after["model"] == before["model"]
    assert after["permissions"]["allow"][0] == "Bash(npm test:*)"  # theirs stays, first
    assert after["env"] == before["env"]  # the configured URL stays
    assert after["hooks"]["Stop"][0] == {"hooks": [theirs]}
    for event in ("SessionStart", "Stop", "SubagentStop"):
        handlers = [h for group in after["hooks"][event] for h in group["hooks"]]
        assert [h["command"] for h in handlers if "strata-hook" in h["command"]] == [command]
    assert "- hooks.Stop: python3 ~/.claude/strata-hook.py" in printed
    assert f"+ hooks.SessionStart: {command}" in printed
    assert script.is_file()
    detail = (claude / "commands" / "sc-detail.md").read_text()
    assert 'python3 ".claude/strata/strata-hook.py" detail <<' in detail


def test_installing_again_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install("--project", str(tmp_path), "--url", "http://127.0.0.1:9000") == 0
    settings = (tmp_path / ".claude" / "settings.json").read_text()
    capsys.readouterr()

    assert _install("--project", str(tmp_path), "--url", "http://127.0.0.1:9000") == 0

    assert "nothing to change" in capsys.readouterr().out
    assert (tmp_path / ".claude" / "settings.json").read_text() == settings
    local = json.loads((tmp_path / ".claude" / "settings.local.json").read_text())
    assert local["env"]["STRATA_URL"] == "http://127.0.0.1:9000"


def test_a_dry_run_prints_the_changes_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install("--project", str(tmp_path), "--dry-run") == 0

    printed = capsys.readouterr().out
    assert "would change" in printed and "hooks.SessionStart" in printed
    assert "env.STRATA_URL = http://127.0.0.1:8000" in printed
    assert not (tmp_path / ".claude").exists()


def test_install_for_the_user_goes_to_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))

    assert _install("--user", "--api-key", "sk-strata") == 0

    path = tmp_path / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    assert settings["env"] == {"STRATA_URL": "http://127.0.0.1:8000", "STRATA_API_KEY": "sk-strata"}
    assert path.stat().st_mode & 0o777 == 0o600  # the key: readable by its owner only
    assert (tmp_path / ".claude" / "commands" / "sc-detail.md").is_file()


def test_a_user_install_goes_where_claude_config_dir_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, config_dir = tmp_path / "home", tmp_path / "claude-config"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))

    assert _install("--user", "--api-key", "sk-strata") == 0

    settings = json.loads((config_dir / "settings.json").read_text())
    assert settings["env"]["STRATA_API_KEY"] == "sk-strata"
    assert (config_dir / "commands" / "sc-detail.md").is_file()
    config = json.loads((config_dir / ".claude.json").read_text())
    assert config["mcpServers"] == {"strata": MCP_SERVER}
    assert list(home.iterdir()) == []  # nothing in ~/.claude or ~/.claude.json


def test_settings_that_are_not_json_are_left_alone_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{ not json")

    assert _install("--project", str(tmp_path)) == 2

    assert "not valid JSON" in capsys.readouterr().err
    assert (tmp_path / ".claude" / "settings.json").read_text() == "{ not json"


def _subscribe_with(key: str) -> None:
    """A webhook subscription made with this key (a server without a dispatcher)."""
    get_settings.cache_clear()

    async def subscribe() -> None:
        settings = get_settings().model_copy(
            update={"run_worker_in_server": False, "allowed_hosts": IN_PROCESS_HOSTS}
        )
        async with serve(settings) as (_, client):
            response = await client.post(
                "/webhooks",
                json={"url": "https://93.184.216.34/hooks/strata", "events": ["*"]},
                headers={"authorization": f"Bearer {key}"},
            )
        assert response.status_code == 201, response.text

    asyncio.run(subscribe())


def test_revoking_a_tenants_last_key_says_its_webhooks_were_disabled(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _create_key(capsys)
    ((key_id, *_),) = _key_rows(capsys)
    _subscribe_with(key)

    assert main(["keys", "revoke", key_id]) == 0

    said = capsys.readouterr().err
    assert "tenant 'acme' has no valid key left: its 1 enabled webhook subscription(s)" in said
    assert _query(db_url, "SELECT enabled FROM webhook_subscriptions") == [(False,)]


SECRET_KEY = "sk_strata_personal_0123456789"


def test_a_project_install_keeps_the_key_and_machine_paths_out_of_the_shared_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install("--project", str(tmp_path), "--api-key", SECRET_KEY) == 0

    claude = tmp_path / ".claude"
    shared = [claude / "settings.json", claude / "commands" / "sc-detail.md"]
    for path in [*shared, claude / "strata" / "strata-hook.py"]:
        text = path.read_text()
        assert SECRET_KEY not in text and str(tmp_path) not in text, path
    local = claude / "settings.local.json"
    assert json.loads(local.read_text())["env"] == {
        "STRATA_URL": "http://127.0.0.1:8000",
        "STRATA_API_KEY": SECRET_KEY,
    }
    assert local.stat().st_mode & 0o777 == 0o600
    printed = capsys.readouterr().out
    assert SECRET_KEY not in printed
    assert "settings.local.json: env.STRATA_API_KEY = (hidden)" in printed
    assert f"personal (never commit it): {local}: env.STRATA_URL, env.STRATA_API_KEY" in printed


def test_a_project_install_moves_a_key_an_earlier_install_left_in_the_shared_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = tmp_path / ".claude"
    claude.mkdir()
    earlier = {"env": {"STRATA_URL": "http://strata.team:8000", "STRATA_API_KEY": SECRET_KEY}}
    (claude / "settings.json").write_text(json.dumps(earlier))

    assert _install("--project", str(tmp_path)) == 0

    assert json.loads((claude / "settings.json").read_text())["env"] == {
        "STRATA_URL": "http://strata.team:8000"  # the team's server stays the team's
    }
    local = json.loads((claude / "settings.local.json").read_text())
    assert local["env"] == {"STRATA_API_KEY": SECRET_KEY}
    printed = capsys.readouterr().out
    assert "settings.json: - env.STRATA_API_KEY (moved to settings.local.json" in printed
    assert SECRET_KEY not in printed


def test_a_project_install_says_when_git_would_commit_the_personal_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)

    assert _install("--project", str(tmp_path), "--api-key", SECRET_KEY) == 0

    assert "is in a git work tree and not ignored" in capsys.readouterr().out
    (tmp_path / ".gitignore").write_text(".claude/settings.local.json\n")
    assert _install("--project", str(tmp_path)) == 0
    assert "not ignored" not in capsys.readouterr().out


MCP_SERVER = {
    "type": "http",
    "url": "${STRATA_URL:-http://127.0.0.1:8000}/mcp",
    "headers": {"Authorization": "Bearer ${STRATA_API_KEY:-}"},
}
READ_TOOLS = [
    f"mcp__strata__{tool}"
    for tool in ("memory_search", "memory_timeline", "memory_detail", "tasks_list", "task_get")
]


def test_a_user_install_registers_the_mcp_server_in_claude_json_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / ".claude.json"
    config.write_text(json.dumps({"numStartups": 3, "mcpServers": {"git": {"command": "git"}}}))

    assert _install("--user", "--api-key", SECRET_KEY) == 0

    written = json.loads(config.read_text())
    assert written == {
        "numStartups": 3,
        "mcpServers": {"git": {"command": "git"}, "strata": MCP_SERVER},
    }
    assert SECRET_KEY not in config.read_text()
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["allow"] == READ_TOOLS
    printed = capsys.readouterr().out
    assert f"{config}: mcpServers.strata, Strata's MCP server at $STRATA_URL/mcp" in printed


def test_a_project_install_registers_the_mcp_server_in_the_projects_mcp_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install("--project", str(tmp_path), "--api-key", SECRET_KEY) == 0

    mcp = tmp_path / ".mcp.json"
    # Claude Code expands a project's .mcp.json from its own environment only: the key comes
    # from the installed script, which reads settings.local.json
    assert json.loads(mcp.read_text()) == {
        "mcpServers": {
            "strata": {
                "type": "http",
                "url": "${STRATA_URL:-http://127.0.0.1:8000}/mcp",
                "headersHelper": 'python3 ".claude/strata/strata-hook.py" mcp-headers',
            }
        }
    }
    claude = tmp_path / ".claude"
    shared = json.loads((claude / "settings.json").read_text())
    assert shared["permissions"]["allow"] == READ_TOOLS
    local = json.loads((claude / "settings.local.json").read_text())
    assert local["enabledMcpjsonServers"] == ["strata"]  # the yes Claude Code would ask for
    for path in (mcp, claude / "settings.json"):
        assert SECRET_KEY not in path.read_text(), path
    printed = capsys.readouterr().out
    assert f"{mcp} (mcpServers.strata: the server's /mcp, the key read by" in printed
    assert "settings.local.json: + enabledMcpjsonServers: strata" in printed


def test_a_project_install_without_a_key_says_where_one_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _install("--project", str(tmp_path)) == 0

    printed = capsys.readouterr().out
    assert "no API key written: if the server has keys, run again with `--api-key -`" in printed
    assert "or export STRATA_API_KEY" in printed


def test_the_key_can_come_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET_KEY + "\n"))

    assert _install("--project", str(tmp_path), "--api-key", "-") == 0

    local = json.loads((tmp_path / ".claude" / "settings.local.json").read_text())
    assert local["env"]["STRATA_API_KEY"] == SECRET_KEY
    assert SECRET_KEY not in capsys.readouterr().out


def test_a_refused_setting_ends_the_command_with_the_variable_and_why(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STRATA_PORT", "abc")
    monkeypatch.setenv("STRATA_WORKER_CONCURRENCY", "-x")

    assert main(["serve"]) == 2

    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "STRATA_PORT='abc': Input should be a valid integer" in err
    assert "STRATA_WORKER_CONCURRENCY='-x': Input should be a valid integer" in err


def test_a_refused_setting_that_may_hold_a_credential_is_not_echoed(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STRATA_WEBHOOK_SECRET_OVERLAP_SECONDS", "hunter2-not-a-number")

    assert main(["migrate"]) == 2

    err = capsys.readouterr().err
    assert "STRATA_WEBHOOK_SECRET_OVERLAP_SECONDS:" in err
    assert "hunter2" not in err
