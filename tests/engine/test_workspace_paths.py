"""Workspace path confinement: every way out is refused, every way in works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.engine.tools import ToolError
from app.engine.workspace import Workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("TOPSECRET\n")
    return folder


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws")
    workspace.ensure_layout()
    root = workspace.root
    (root / "input" / "a.txt").write_text("a\n")
    (root / "input" / "deep").mkdir()
    (root / "input" / "deep" / "b.txt").write_text("b\n")
    (root / "output" / "r.md").write_text("r\n")
    os.symlink(outside / "secret.txt", root / "input" / "link_file")
    os.symlink(outside, root / "input" / "link_dir")
    os.symlink(outside / "missing.txt", root / "input" / "dangling")
    os.symlink(root / "input" / "a.txt", root / "input" / "inner_link")
    os.symlink(root / "input" / "link_file", root / "input" / "chain")
    return workspace


def test_layout(ws: Workspace) -> None:
    assert sorted(p.name for p in ws.root.iterdir()) == ["input", "logs", "output"]
    ws.ensure_layout()  # idempotent


def test_resolve_inside(ws: Workspace) -> None:
    root = ws.root
    assert ws.resolve("input/a.txt", must_exist=True) == root / "input" / "a.txt"
    assert ws.resolve(".") == root
    assert ws.resolve("./input//deep/../a.txt") == root / "input" / "a.txt"
    assert ws.resolve("output/new/file.txt") == root / "output" / "new" / "file.txt"
    # a link whose target stays inside is followed
    assert ws.resolve("input/inner_link") == root / "input" / "a.txt"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../secret", "leaves the workspace"),
        ("sub/../../x", "leaves the workspace"),
        ("input/../../outside/secret.txt", "leaves the workspace"),
        ("..", "leaves the workspace"),
        ("/etc/passwd", "is absolute"),
        ("input/link_file", "through a symbolic link"),
        ("input/link_dir", "through a symbolic link"),
        ("input/link_dir/secret.txt", "through a symbolic link"),
        ("input/link_dir/new.txt", "through a symbolic link"),
        ("input/dangling", "through a symbolic link"),
        ("input/chain", "through a symbolic link"),
        ("", "empty"),
        ("a\x00b", "NUL"),
    ],
)
def test_resolve_refuses(ws: Workspace, path: str, reason: str) -> None:
    with pytest.raises(ToolError, match=reason):
        ws.resolve(path)


def test_resolve_message_names_the_path(ws: Workspace) -> None:
    with pytest.raises(ToolError) as caught:
        ws.resolve("../x")
    assert str(caught.value) == "path '../x' leaves the workspace"


def test_must_exist(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="no such file"):
        ws.resolve("input/nope.txt", must_exist=True)


def test_link_loop_stays_harmless(ws: Workspace) -> None:
    os.symlink("loop_b", ws.root / "input" / "loop_a")
    os.symlink("loop_a", ws.root / "input" / "loop_b")
    with pytest.raises(ToolError):
        ws.resolve("input/loop_a", must_exist=True)


def test_relative(ws: Workspace) -> None:
    assert ws.relative(ws.root / "input" / "a.txt") == "input/a.txt"
    assert ws.relative(ws.root) == "."
    assert ws.relative("output/r.md") == "output/r.md"
    with pytest.raises(ToolError):
        ws.relative(ws.root.parent / "outside")
    with pytest.raises(ToolError):
        ws.relative(ws.root / ".." / "outside")


def test_list_files(ws: Workspace) -> None:
    assert ws.list_files("input") == ["input/a.txt", "input/deep/b.txt", "input/inner_link"]
    assert ws.list_files("output") == ["output/r.md"]
    assert ws.list_files("logs") == []
    assert ws.list_files("nowhere") == []
    assert "input/a.txt" in ws.list_files(".")
    with pytest.raises(ToolError):
        ws.list_files("input/link_dir")
    with pytest.raises(ToolError):
        ws.list_files("..")
