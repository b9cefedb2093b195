"""The operator's stdio servers file, and the confinement a server is started under."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.mcp.stdio import ServersFileError, load_operator_servers
from app.tools.sandbox import Confinement, bwrap_works


def write(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(servers), encoding="utf-8")
    return path


def test_no_file_names_no_server() -> None:
    assert load_operator_servers(None) == {}


def test_a_server_name_outside_the_pattern_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServersFileError, match="no server name"):
        load_operator_servers(write(tmp_path, {"Bad Name": {"command": "x"}}))


def test_an_unknown_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServersFileError, match="shell"):
        load_operator_servers(write(tmp_path, {"x": {"command": "x", "shell": True}}))


def test_a_server_starts_in_the_jobs_folder_with_a_scrubbed_environment(tmp_path: Path) -> None:
    servers = load_operator_servers(
        write(tmp_path, {"x": {"command": "/bin/true", "env": {"TZ": "UTC"}}})
    )
    launched = servers["x"].launch(tmp_path / "job", Confinement(sandbox="none"))
    assert launched.cwd == (tmp_path / "job").resolve()
    assert launched.env["PATH"] == "/usr/bin:/bin" and launched.env["TZ"] == "UTC"
    assert "ANTHROPIC_API_KEY" not in launched.env
    assert launched.errlog == tmp_path / "job" / "logs" / "mcp-x.log"


def test_under_bubblewrap_a_server_may_read_its_paths(tmp_path: Path) -> None:
    if not bwrap_works():
        pytest.skip("bwrap cannot sandbox here")
    servers = load_operator_servers(
        write(tmp_path, {"x": {"command": "/bin/true", "paths": ["/opt/mcp"]}})
    )
    argv = servers["x"].launch(tmp_path / "job", Confinement(sandbox="bwrap")).argv
    assert "--ro-bind-try" in argv and "/opt/mcp" in argv
