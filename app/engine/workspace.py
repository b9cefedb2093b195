"""A job's workspace on disk, and the confinement of every path a tool touches to it.

A workspace is a folder with `input/` (files the user uploaded), `output/` (what the
agent produces) and `logs/` (kept by the runner, e.g. `lessons.jsonl`). Tools name files
by paths relative to its root; `Workspace.resolve` turns such a path into a real path and
refuses anything that would leave the root: absolute paths, `..` that climbs above it,
and symbolic links (anywhere along the path, the last component and dangling links
included) whose target lies outside. The answer is the fully resolved path, so what a
tool then opens is exactly what was checked.

Pure filesystem code: no web framework, no database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from app.engine.tools import ToolError

LAYOUT = ("input", "output", "logs")


class Workspace:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def contains(self, path: Path) -> bool:
        """Whether an absolute path, taken literally, lies under the root (or is it)."""
        return path == self.root or path.is_relative_to(self.root)

    def resolve(self, relative: str, *, must_exist: bool = False) -> Path:
        """The real path of `relative` (relative to the root), or a ToolError saying why not."""
        if not relative or not relative.strip():
            raise ToolError("the path is empty; give a path relative to the workspace")
        if "\x00" in relative:
            raise ToolError(f"path {relative!r} contains a NUL character")
        pure = PurePosixPath(relative)
        if pure.is_absolute():
            raise ToolError(
                f"path {relative!r} is absolute; paths are relative to the workspace "
                "(e.g. 'input/data.csv')"
            )
        depth = 0
        for part in pure.parts:
            depth += -1 if part == ".." else 1
            if depth < 0:
                raise ToolError(f"path {relative!r} leaves the workspace")
        # realpath follows every link along the way (dangling ones to where they point),
        # so a link leading outside shows up as a real path outside the root.
        real = Path(os.path.realpath(self.root / pure))
        if not self.contains(real):
            raise ToolError(f"path {relative!r} leaves the workspace through a symbolic link")
        if must_exist and not real.exists():
            raise ToolError(f"no such file or directory: {relative!r}")
        return real

    def relative(self, path: Path | str) -> str:
        """`path` relative to the root, in POSIX form ('.' for the root itself)."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        candidate = Path(os.path.normpath(candidate))
        if not self.contains(candidate):
            candidate = Path(os.path.realpath(candidate))
            if not self.contains(candidate):
                raise ToolError(f"{str(path)!r} is outside the workspace")
        return candidate.relative_to(self.root).as_posix()

    def ensure_layout(self) -> None:
        """Create the root and its `input/`, `output/` and `logs/` folders if missing."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in LAYOUT:
            (self.root / name).mkdir(exist_ok=True)

    def iter_files(self, base: Path | None = None) -> Iterator[Path]:
        """Regular files under `base` (default: the root), in sorted walk order.

        Linked folders are not entered; a linked file is listed (under the link's own
        path) only when its target is a regular file inside the workspace.
        """
        start = self.root if base is None else base
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink():
                    target = Path(os.path.realpath(path))
                    if not self.contains(target) or not target.is_file():
                        continue
                elif not path.is_file():
                    continue
                yield path

    def list_files(self, sub: str = ".") -> list[str]:
        """Files under `sub`, as sorted paths relative to the root (e.g. 'input/a.csv').

        A missing `sub` lists nothing; a `sub` outside the workspace is a ToolError.
        """
        base = self.resolve(sub)
        if not base.is_dir():
            return []
        return sorted(self.relative(path) for path in self.iter_files(base))
