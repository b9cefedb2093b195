"""Every curl in README.md and docs/*.md runs, as written, against a real server.

The shell blocks of a page that call `curl` run in order in one bash process (so a
variable one block sets, such as `session=$(curl …)`, is there for the next), with
`set -e -o pipefail` and `curl` failing on any HTTP error status: a documented request the
server refuses, or a block that fails, fails the page's test with the script's output.
Only the address changes: `localhost:8000` and `127.0.0.1:8000` become the test server's,
a `strata serve` subprocess without keys whose LLM is the fake Messages API.

A block that cannot run here says so in an HTML comment on the line before it:
`<!-- not run: why -->` (a container to start, a key of a deployment); the test lists
these, so that they stay few.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO_ROOT, StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use
from tests.support.mcp import HttpServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:^<!-- not run: (?P<why>[^>]*) -->\n)?"
    r"^[ \t]*```(?:bash|sh|shell)\n(?P<body>.*?)^[ \t]*```",
    re.MULTILINE | re.DOTALL,
)
DOCUMENTED_ADDRESS = re.compile(r"(?:localhost|127\.0\.0\.1):8000")
RUN_WITHIN = 150.0  # seconds for a page's blocks, turns included
PREAMBLE = """\
set -e -o pipefail
curl() { command curl --fail-with-body --max-time 60 "$@"; }
"""


@dataclass(frozen=True)
class Block:
    page: Path
    body: str
    not_run: str | None


def curl_blocks(page: Path) -> list[Block]:
    found = BLOCK.finditer(page.read_text(encoding="utf-8"))
    return [Block(page, m["body"], m["why"]) for m in found if re.search(r"\bcurl\b", m["body"])]


def _pages_with_curls() -> list[Any]:
    return [
        pytest.param(page, id=page.relative_to(REPO_ROOT).as_posix())
        for page in PAGES
        if any(block.not_run is None for block in curl_blocks(page))
    ]


ASKED_TOOL = re.compile(r"\bUse (?:the )?([A-Za-z0-9_-]+)")
"""How a documented prompt names the tool it wants called (`Use current_time.`)."""
EVERYTHING_ADDRESS = "127.0.0.1:3001"
"""Where the MCP walk-throughs (README.md, docs/mcp.md) start the reference MCP server."""


def _answer(body: dict[str, Any]) -> Step:
    """A scripted model: after a tool's result, an answer; asked to use an offered tool,
    a call of it (its number parameters, in order, the prompt's numbers); else a greeting."""
    content = body["messages"][-1]["content"]
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    if any(block.get("type") == "tool_result" for block in blocks):
        return reply(text("It is done: the tool answered."))
    said = " ".join(str(block.get("text", "")) for block in blocks)
    if (asked := ASKED_TOOL.search(said)) is not None:
        for tool in body.get("tools", []):
            name = str(tool["name"])
            if name == asked[1] or name.endswith(f"__{asked[1]}"):
                return reply(tool_use(name, _numbers_for(tool, said)))
    return reply(text("Hello there, nice to meet!"))


def _numbers_for(tool: dict[str, Any], said: str) -> dict[str, Any]:
    """The tool's number parameters given the numbers the prompt says, in order."""
    numbers = iter(int(n) for n in re.findall(r"\b\d+\b", said))
    properties: dict[str, Any] = tool.get("input_schema", {}).get("properties", {})
    wanted = [key for key, schema in properties.items() if schema.get("type") == "number"]
    return dict(zip(wanted, numbers, strict=False))


def test_the_pages_with_curls_are_the_expected_ones() -> None:
    """The documentation shows curls to run (a lost pattern would run none and pass)."""
    names = {param.id for param in _pages_with_curls()}

    assert {"README.md", "docs/getting-started.md"} <= names


def test_few_curl_blocks_are_left_unrun() -> None:
    not_run = [(b.page.name, b.not_run) for page in PAGES for b in curl_blocks(page) if b.not_run]

    assert len(not_run) <= 2, not_run


@pytest.mark.parametrize("page", _pages_with_curls())
def test_every_curl_of_the_page_runs_against_a_server(
    page: Path,
    strata_procs: StrataProcesses,
    fake_llm: FakeMessagesAPI,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    fake_llm.always(_answer)
    # an MCP walk-through's server: the reference one, on a loopback port of the test's
    mcp_address = EVERYTHING_ADDRESS
    if EVERYTHING_ADDRESS in page.read_text(encoding="utf-8"):
        everything: HttpServer = request.getfixturevalue("everything_http")
        mcp_address = everything.url("").removeprefix("http://")
    server = strata_procs.serve(STRATA_MCP_ALLOW_PRIVATE="true")
    address = server.url.removeprefix("http://")
    script = PREAMBLE + "\n".join(
        DOCUMENTED_ADDRESS.sub(address, block.body).replace(EVERYTHING_ADDRESS, mcp_address)
        for block in curl_blocks(page)
        if block.not_run is None
    )

    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_WITHIN,
        check=False,
    )

    assert done.returncode == 0, f"{page.name}:\n{script}\n--- output\n{done.stdout}\n{done.stderr}"
