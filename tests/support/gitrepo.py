"""Building repositories for the git excerpt's tests with the real git, configured by
nothing of the machine (no system or global config, HOME an empty folder)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from app.engine.workspace import Workspace
from app.settings import Settings
from app.worker.gitdata import Budget, Changes, read_changes


class Repo:
    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "LANG": "C.UTF-8",
        }

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.root), *args],
            env=self.env,
            capture_output=True,
            check=True,
        )
        return done.stdout.decode("utf-8", "replace")

    def init(self, branch: str = "main") -> Repo:
        self.root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", branch)
        return self

    def write(self, path: str, content: str | bytes) -> Path:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            target.write_text(content, encoding="utf-8")
        else:
            target.write_bytes(content)
        return target

    def commit(self, message: str = "change", *paths: str) -> None:
        self.git("add", "-A", *paths)
        self.git("commit", "-q", "--allow-empty", "-m", message)

    def status(self) -> str:
        """What git itself says, config-free: the reference the excerpt is compared with
        (the executable bit not looked at, no rename detection, paths unquoted)."""
        return self._plain("status", "--short", "--branch", "--untracked-files=normal")

    def diff(self, *how: str) -> str:
        return self._plain("diff", "--no-ext-diff", "--no-textconv", "--no-color", *how)

    def _plain(self, *args: str) -> str:
        settings = ("core.fileMode=false", "status.renames=false", "core.quotePath=false")
        return self.git(*(f for s in settings for f in ("-c", s)), *args).rstrip("\n")


def budget_of(settings: Settings) -> Budget:
    return Budget(
        max_files=settings.git_excerpt_max_files,
        max_read_bytes=settings.git_excerpt_max_read_bytes,
        diff_max_lines=settings.git_excerpt_diff_max_lines,
    )


def read(
    workspace: Workspace | Path, where: str = ".", settings: Settings | None = None
) -> Changes:
    """The excerpt's reading of the repository at `where`, uncut."""
    settings = settings or Settings(_env_file=None)
    root = workspace.root if isinstance(workspace, Workspace) else workspace
    return read_changes(root, where, budget_of(settings), 1_000_000)
