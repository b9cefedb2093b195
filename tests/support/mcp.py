"""Real MCP servers for the MCP tests, as `make mcp-tools` installs them, and the suite's
own fault server (`tests.mcp.fault_server`); each HTTP server on a loopback port, waited
for by what it prints once it listens. Its fixtures are every test's (`tests/conftest.py`).
Also what the MCP API tests share: the operator's servers file, a server's settings, and a
turn sent and its last tool result read."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.settings import MakeSettings

REPO = Path(__file__).resolve().parents[2]
SECRET_HEADER = {"Authorization": "Bearer open-sesame"}
MCP_VENV = REPO / ".venv-mcp" / "bin"
EVERYTHING = (
    REPO / "tests/mcp/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def installed(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: `make mcp-tools` installs the MCP test servers")
    return path


def time_server() -> list[str]:
    return [str(installed(MCP_VENV / "mcp-server-time")), "--local-timezone", "UTC"]


def git_server(repository: Path) -> list[str]:
    return [str(installed(MCP_VENV / "mcp-server-git")), "--repository", str(repository)]


def everything_stdio() -> list[str]:
    return ["node", str(installed(EVERYTHING)), "stdio"]


def fault_stdio(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.mcp.fault_server", "stdio", *extra]


class HttpServer:
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.port = port

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def fault_http() -> Iterator[HttpServer]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.fault_server", "http"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    yield HttpServer(process, port)
    process.kill()
    process.wait()
    process.stdout.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def everything_http() -> Iterator[HttpServer]:
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(installed(EVERYTHING)), "streamableHttp"],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "PORT": str(port)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if "listening on port" in line:
            break
    else:
        pytest.fail("server-everything ended before it listened")
    yield HttpServer(process, port)
    process.kill()
    process.wait()
    process.stderr.close()


# --- what the MCP API tests share: the operator's servers, a server's settings, a turn ---


def git_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    for command in (
        ["git", "init", "-q", "-b", "main"],
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "the first commit",
        ],
    ):
        subprocess.run(command, cwd=repo, env=env, check=True)
    (repo / "new.txt").write_text("not yet added\n", encoding="utf-8")
    return repo


def servers_file(tmp_path: Path) -> Path:
    readable = [str(REPO), sys.base_prefix]
    repo = git_repository(tmp_path)
    servers = {
        "git": {
            "command": str(installed(MCP_VENV / "mcp-server-git")),
            "args": ["--repository", str(repo)],
            "paths": [*readable, str(repo)],
        },
        "time": {
            "command": str(installed(MCP_VENV / "mcp-server-time")),
            "args": ["--local-timezone", "UTC"],
            "paths": readable,
        },
        "faults": {
            "command": sys.executable,
            "args": ["-m", "tests.mcp.fault_server", "stdio"],
            "env": {"PYTHONPATH": str(REPO)},
            "paths": readable,
        },
        "many": {
            "command": sys.executable,
            "args": ["-m", "tests.mcp.fault_server", "stdio", "--tools", "500"],
            "env": {"PYTHONPATH": str(REPO)},
            "paths": readable,
        },
        "wary": {
            "command": sys.executable,
            "args": ["-m", "tests.mcp.fault_server", "stdio"],
            "env": {"PYTHONPATH": str(REPO)},
            "paths": readable,
            "trusted": False,
        },
    }
    path = tmp_path / "mcp-servers.json"
    path.write_text(json.dumps(servers), encoding="utf-8")
    return path


ALLOW_MCP = [{"tool": "mcp__*", "effect": "allow"}]
"""A session rule letting every MCP tool run unasked: these tests are about calls, and
the fault server's tools declare no readOnlyHint (their default is `ask`)."""


def mcp_settings(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI, servers: Path, **overrides: Any
) -> Settings:
    """A server's settings for the MCP API tests: the fake Messages API, a quick worker,
    the operator's servers of `servers` (`servers_file`) and a connect timeout a loaded
    machine meets; `overrides` add to them or change them."""
    values: dict[str, Any] = {
        "anthropic_base_url": fake_llm.url,
        "llm_max_retries": 2,
        "llm_timeout_seconds": 10.0,
        "worker_poll_seconds": 0.05,
        "mcp_servers_file": servers,
        "mcp_connect_timeout_seconds": 30.0,
    }
    return make_settings(**(values | overrides))


async def say(client: httpx.AsyncClient, session_id: str, words: str) -> Any:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": words}
    )
    assert response.status_code == 200, response.text
    return response.json()


def last_result(fake_llm: FakeMessagesAPI) -> dict[str, Any]:
    block: dict[str, Any] = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result"
    return block
