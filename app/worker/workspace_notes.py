"""What the workspace tells the next movement besides the lessons (seed 004).

* Checklists: after each movement the job's task list is written to
  `logs/checklists/tasks.json`; every other `logs/checklists/*.json` (a movement may
  write its own there) is shown to the next movement as it is now, within a cap.
* After a verify movement, when the workspace (its root, `output/` or `input/`) is a git
  repository, a `git status` and diff excerpt of it, within a cap. It is read as data by
  `app.worker.gitdata`, never by running git: nothing a repository's configuration,
  attributes or hooks name can run (see that package for why and how).
* Subtasks: a finished child's `output/` is copied into the parent's
  `input/subtasks/<child>/`, so the parent's tools can read it (the agent's tools do not
  write there).

Each returns text already cut to its cap, so nothing here can grow a prompt unbounded.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from app.domain.tasks import TaskStore
from app.engine.workspace import Workspace
from app.settings import Settings
from app.worker.gitdata import Budget, read_changes

CHECKLISTS = "logs/checklists"
TASKS_CHECKLIST = "tasks.json"
SUBTASKS = "input/subtasks"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = f"\n… [cut: {len(text) - limit} more characters]"
    return text[: max(0, limit - len(note))] + note


def write_task_checklist(workspace: Workspace, tasks: TaskStore) -> None:
    folder = workspace.root / CHECKLISTS
    folder.mkdir(parents=True, exist_ok=True)
    document = {"tasks": [task.model_dump(mode="json") for task in tasks.all()]}
    target = folder / TASKS_CHECKLIST
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
    partial.replace(target)  # whole or not at all, for a reader at any moment


def checklists_text(workspace: Workspace, limit: int) -> str | None:
    """The movement-written checklists as they are now, oldest file name first."""
    folder = workspace.root / CHECKLISTS
    if not folder.is_dir():
        return None
    parts: list[str] = []
    for path in sorted(folder.glob("*.json")):
        if path.name == TASKS_CHECKLIST or path.is_symlink() or not path.is_file():
            continue
        raw = path.read_bytes()[: limit * 4]
        try:
            body = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, UnicodeDecodeError) as exc:
            body = f"(not valid JSON: {exc})"
        parts.append(f"### {CHECKLISTS}/{path.name}\n{body}")
    return _cut("\n\n".join(parts), limit) if parts else None


def _repository(workspace: Workspace) -> tuple[str, bool] | None:
    """The first of the root, `output/` and `input/` holding a `.git`, and whether that
    `.git` is a plain folder (a link, or a `gitdir:` file, is not followed)."""
    for where in (".", "output", "input"):
        folder = workspace.root / where
        if where != "." and (folder.is_symlink() or not folder.is_dir()):
            continue
        git = folder / ".git"
        if git.is_symlink() or git.exists():
            return where, git.is_dir() and not git.is_symlink()
    return None


async def git_excerpt(workspace: Workspace, settings: Settings) -> str | None:
    """`git status --short --branch` and the start of `git diff --stat --patch` of the
    workspace's repository, if any, cut to `git_excerpt_max_chars`."""
    found = _repository(workspace)
    if found is None:
        return None
    where, plain = found
    shown = "." if where == "." else f"{where}/"
    if not plain:
        reason = f"{'' if where == '.' else shown}.git is a link or a file, not a git folder"
        return f"$ git status ({shown})\n    ({reason}: not read)"
    limit = settings.git_excerpt_max_chars
    budget = Budget(
        max_files=settings.git_excerpt_max_files,
        max_read_bytes=settings.git_excerpt_max_read_bytes,
        diff_max_lines=settings.git_excerpt_diff_max_lines,
    )
    changes = await asyncio.to_thread(read_changes, workspace.root, where, budget, limit)
    text = (
        f"$ git status ({shown})\n{_indented(changes.status)}\n"
        f"$ git diff\n{_indented(changes.diff or '(no unstaged changes)')}"
    )
    return _cut(text, limit)


def _indented(output: str) -> str:
    # a code block: git's own "## branch" line must not read as a heading of the prompt
    return "\n".join(f"    {line}" for line in output.splitlines())


def _copy_output(child: Workspace, target: Path) -> None:
    source = child.root / "output"
    if target.exists() or not source.is_dir():
        return
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial, symlinks=True)
    partial.replace(target)


async def mount_subtask_outputs(parent: Workspace, children: list[Workspace]) -> None:
    """Copy each finished child's output/ into the parent's input/subtasks/<child>/, once."""

    def copy() -> None:
        for child in children:
            target = parent.root / SUBTASKS / child.root.name
            target.parent.mkdir(parents=True, exist_ok=True)
            _copy_output(child, target)

    await asyncio.to_thread(copy)
