"""The git excerpt after a verify movement runs nothing a workspace names.

Black-box, as a new user and as an attacker would go about it: a repository uploaded
through the files API with a `[filter]` clean command in `input/.git/config`, and a
`.gitconfig` the agent writes at the workspace root with the Write tool; both point at
a program outside the workspace. The real runner runs the default piece (its review is
a verify movement) with bubblewrap and with `STRATA_BASH_SANDBOX=none`: the program
never runs, and the next movement still sees the change.
"""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from app.tools.sandbox import bwrap_works
from tests.api.test_pieces_flow import (  # noqa: F401  (fixtures)
    finish,
    piece_settings,
    pieces_dir,
    prompt_of,
    section,
    tool_results,
    transition,
)
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import serve
from tests.support.chat import submit_job
from tests.support.gitrepo import Repo

Strata = tuple[FastAPI, httpx.AsyncClient]
SANDBOXES = [
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(
            not bwrap_works(), reason="bubblewrap (bwrap) is not installed or cannot sandbox here"
        ),
    ),
    "none",
]


@pytest.fixture(params=SANDBOXES)
async def strata_sandboxed(
    request: pytest.FixtureRequest,
    piece_settings: Callable[..., Settings],  # noqa: F811
) -> AsyncIterator[Strata]:
    async with serve(piece_settings(bash_sandbox=request.param)) as parts:
        yield parts


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """A program outside every workspace that leaves a marker next to itself."""
    script = tmp_path / "outside" / "run.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nid >> {script.parent}/marker\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def repository(tmp_path: Path) -> Repo:
    """A repository with a committed report and a change to it, not yet uploaded."""
    repo = Repo(tmp_path / "upload", tmp_path / "home").init()
    repo.write("report.md", "first line\n")
    repo.commit("start")
    repo.write("report.md", "first line\nsecond line\n")
    return repo


def files_of(folder: Path) -> list[tuple[str, bytes]]:
    found = sorted(p for p in folder.rglob("*") if p.is_file())
    return [(path.relative_to(folder).as_posix(), path.read_bytes()) for path in found]


async def upload(client: httpx.AsyncClient, job_id: str, folder: Path) -> None:
    """Every file of `folder`, its `.git` included, PUT into the job's input/."""
    for relative, content in files_of(folder):
        put = await client.put(f"/jobs/{job_id}/files/input/{relative}", content=content)
        assert put.status_code == 201, put.text


def script_review_then_back(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.reply(transition("review", "worked"))  # work
    fake_llm.reply(transition("work", "add a title"))  # review (verify)
    fake_llm.reply(transition("ABORT", "stop"))  # work again, with the excerpt


def assert_reviewable(excerpt: str) -> None:
    assert "     M report.md" in excerpt
    assert "    +second line" in excerpt


async def test_an_uploaded_repository_s_clean_filter_never_runs(
    strata_sandboxed: Strata, fake_llm: FakeMessagesAPI, tmp_path: Path, program: Path
) -> None:
    _, client = strata_sandboxed
    repo = repository(tmp_path)
    (repo.root / ".git" / "config").write_text(
        (repo.root / ".git" / "config").read_text() + f'[filter "x"]\n\tclean = {program}\n'
    )
    repo.write(".gitattributes", "* filter=x\n")
    draft = await submit_job(client, start=False)
    await upload(client, draft["id"], repo.root)
    fake_llm.reply(transition("work", "planned"))
    script_review_then_back(fake_llm)

    await client.post(f"/jobs/{draft['id']}/start")
    await finish(client, draft["id"])

    assert not (program.parent / "marker").exists(), (program.parent / "marker").read_text()
    assert_reviewable(section(prompt_of(fake_llm.requests[3].body), "Workspace changes (git)"))


async def test_a_gitconfig_the_agent_writes_at_the_root_never_runs(
    strata_sandboxed: Strata, fake_llm: FakeMessagesAPI, tmp_path: Path, program: Path
) -> None:
    _, client = strata_sandboxed
    repo = repository(tmp_path)
    draft = await submit_job(client, start=False)
    await upload(client, draft["id"], repo.root)
    fake_llm.reply(transition("work", "planned"))
    config = f'[filter "x"]\n\tclean = {program}\n[core]\n\tfsmonitor = {program}\n'
    fake_llm.reply(tool_use("Write", {"path": ".gitconfig", "content": config}))
    fake_llm.reply(tool_use("Write", {"path": "input/.gitattributes", "content": "* filter=x\n"}))
    script_review_then_back(fake_llm)

    await client.post(f"/jobs/{draft['id']}/start")
    await finish(client, draft["id"])

    written = tool_results(fake_llm.requests[2].body) + tool_results(fake_llm.requests[3].body)
    assert [result["is_error"] for result in written] == [False, False]
    assert not (program.parent / "marker").exists(), (program.parent / "marker").read_text()
    assert_reviewable(section(prompt_of(fake_llm.requests[5].body), "Workspace changes (git)"))
