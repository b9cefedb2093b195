"""Real MCP servers for the MCP tests, as `make mcp-tools` installs them, and the suite's
own fault server (`tests.mcp.fault_server`); each HTTP server on a loopback port, waited
for by what it prints once it listens. Its fixtures are every test's (`tests/conftest.py`)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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
