"""No file in a workspace makes the git excerpt run a program.

git honours what a repository holds: were the excerpt, computed after every verify
movement, to run git, a `[filter]` clean command in `input/.git/config` (the files API
takes `.git` paths) or in a `.gitconfig` at the workspace root (git's HOME) would run on
the host as the server's user whenever bubblewrap is absent. Each test plants one key that names a
program, in the repository's config, in that `.gitconfig`, or in a file either
includes, and points it at a script OUTSIDE the workspace that would leave a marker
there; then it computes the excerpt (with bubblewrap and with `STRATA_BASH_SANDBOX=none`)
and finds no marker, and the change still shown: the repository stays data to review.
"""

from __future__ import annotations

import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.engine.workspace import Workspace
from app.settings import Settings
from app.tools.sandbox import bwrap_works
from app.worker.workspace_notes import git_excerpt
from tests.support.gitrepo import Repo

SANDBOXES = [
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(
            not bwrap_works(), reason="bubblewrap (bwrap) is not installed or cannot sandbox here"
        ),
    ),
    "none",
]

# each key: its config text ({run} is the program) and the attributes that select it
KEYS: dict[str, tuple[str, str | None]] = {
    "filter.clean": ('[filter "x"]\n\tclean = {run}\n', "* filter=x\n"),
    "filter.smudge": ('[filter "x"]\n\tsmudge = {run}\n', "* filter=x\n"),
    "filter.process": ('[filter "x"]\n\tprocess = {run}\n', "* filter=x\n"),
    "diff.textconv": ('[diff "x"]\n\ttextconv = {run}\n', "* diff=x\n"),
    "diff.command": ('[diff "x"]\n\tcommand = {run}\n', "* diff=x\n"),
    "diff.external": ("[diff]\n\texternal = {run}\n", None),
    "core.fsmonitor": ("[core]\n\tfsmonitor = {run}\n", None),
    "core.hooksPath": ("[core]\n\thooksPath = {hooks}\n", None),
    "core.pager": ("[core]\n\tpager = {run}\n", None),
    "pager.status": ("[pager]\n\tstatus = {run}\n\tdiff = {run}\n", None),
    "core.sshCommand": ("[core]\n\tsshCommand = {run}\n", None),
    "core.alternateRefsCommand": ("[core]\n\talternateRefsCommand = {run}\n", None),
}
# where the key is written: the repository's config, git's HOME (the workspace root, were
# the excerpt to run git), or a file the repository's config includes
PLACES = ("input/.git/config", "root .gitconfig", "include.path", "includeIf")
HOOKS = ("pre-commit", "post-index-change", "post-checkout", "reference-transaction")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace, with a program that leaves a marker there."""
    folder = tmp_path / "outside"
    (folder / "hooks").mkdir(parents=True)
    script = folder / "run.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {folder}/marker\ncat\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    for name in HOOKS:
        hook = folder / "hooks" / name
        hook.write_text(script.read_text())
        hook.chmod(script.stat().st_mode)
    return folder


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "workspace")
    workspace.ensure_layout()
    repo = Repo(workspace.root / "input", tmp_path / "home").init()
    repo.write("report.md", "first line\n")
    repo.commit("start")
    repo.write("report.md", "first line\nsecond line\n")
    return workspace


def plant(workspace: Workspace, outside: Path, key: str, place: str) -> None:
    text, attributes = KEYS[key]
    value = text.format(run=outside / "run.sh", hooks=outside / "hooks")
    config = workspace.root / "input" / ".git" / "config"
    if place == "input/.git/config":
        _append(config, value)
    elif place == "root .gitconfig":
        _append(workspace.root / ".gitconfig", value)
    else:
        _append(workspace.root / "input" / "more.cfg", value)
        section = "[include]" if place == "include.path" else '[includeIf "onbranch:main"]'
        _append(config, f"{section}\n\tpath = ../more.cfg\n")
    if attributes:
        (workspace.root / "input" / ".gitattributes").write_text(attributes)


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def settings_for(sandbox: str) -> Settings:
    return Settings(_env_file=None, bash_sandbox=sandbox)


def assert_reviewable(excerpt: str | None) -> None:
    assert excerpt is not None
    assert "     M report.md" in excerpt
    assert "    +second line" in excerpt


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("key", sorted(KEYS))
async def test_a_git_key_naming_a_program_runs_nothing(
    workspace: Workspace, outside: Path, key: str, place: str, sandbox: str
) -> None:
    plant(workspace, outside, key, place)

    excerpt = await git_excerpt(workspace, settings_for(sandbox))

    assert not (outside / "marker").exists(), (outside / "marker").read_text()
    assert_reviewable(excerpt)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_the_repository_s_own_hooks_run_nothing(
    workspace: Workspace, outside: Path, sandbox: str
) -> None:
    hooks = workspace.root / "input" / ".git" / "hooks"
    for name in HOOKS:
        (hooks / name).write_text((outside / "hooks" / name).read_text())
        (hooks / name).chmod(0o755)

    excerpt = await git_excerpt(workspace, settings_for(sandbox))

    assert not (outside / "marker").exists(), (outside / "marker").read_text()
    assert_reviewable(excerpt)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_worktree_set_in_the_config_does_not_move_the_excerpt_out(
    workspace: Workspace, tmp_path: Path, sandbox: str
) -> None:
    """`core.worktree` would make git compare (and list) a folder outside the workspace."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("HOST FILE\n")
    _append(workspace.root / "input" / ".git" / "config", f"[core]\n\tworktree = {elsewhere}\n")

    excerpt = await git_excerpt(workspace, settings_for(sandbox))

    assert excerpt is not None
    assert "secret.txt" not in excerpt
    assert_reviewable(excerpt)


@pytest.fixture
def processes_started() -> Iterator[Callable[[], list[str]]]:
    """The processes this thread and the ones it starts try to start, while armed
    (an audit hook cannot be removed, so it stays installed and disarmed after)."""
    events: list[str] = []
    armed = threading.Event()
    armed.set()
    _RECORDERS.append((armed, events))
    if not _INSTALLED:
        sys.addaudithook(_record)
        _INSTALLED.append(True)
    yield lambda: list(events)
    armed.clear()


_RECORDERS: list[tuple[threading.Event, list[str]]] = []
_INSTALLED: list[bool] = []
_STARTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")


def _record(event: str, args: tuple[object, ...]) -> None:
    if event in _STARTS:
        for armed, events in _RECORDERS:
            if armed.is_set():
                events.append(f"{event} {args[:2]!r}")


async def test_the_excerpt_starts_no_process_at_all(
    workspace: Workspace, outside: Path, processes_started: Callable[[], list[str]]
) -> None:
    """Whatever key comes next: the excerpt asks the operating system to start nothing."""
    for key in KEYS:
        plant(workspace, outside, key, "input/.git/config")

    excerpt = await git_excerpt(workspace, settings_for("none"))

    assert processes_started() == []
    assert_reviewable(excerpt)


def test_the_process_recorder_sees_a_process_start(
    tmp_path: Path, processes_started: Callable[[], list[str]]
) -> None:
    """The test above would pass vacuously if the recorder missed a start."""
    Repo(tmp_path / "r", tmp_path / "home").init()

    assert any(event.startswith("subprocess.Popen") for event in processes_started())
