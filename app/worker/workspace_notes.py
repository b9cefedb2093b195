"""What the workspace tells the next movement besides the lessons (seed 004).

* Checklists: after each movement the job's task list is written to
  `logs/checklists/tasks.json`; every other `logs/checklists/*.json` (a movement may
  write its own there) is shown to the next movement as it is now, within a cap.
* After a verify movement, when the workspace (its root, `output/` or `input/`) is a git
  repository, a `git status` and diff excerpt of it, within a cap. git runs confined like
  Bash, with hooks, fsmonitor, external diff and textconv off.
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
from app.tools.sandbox import Confinement, run_confined

CHECKLISTS = "logs/checklists"
TASKS_CHECKLIST = "tasks.json"
SUBTASKS = "input/subtasks"
_GIT_SECONDS = 20.0
_GIT = (
    "git",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.pager=cat",
    "-c",
    "color.ui=false",
)


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


def _repository(workspace: Workspace) -> Path | None:
    for folder in (workspace.root, workspace.root / "output", workspace.root / "input"):
        git = folder / ".git"
        if git.exists() and not git.is_symlink():
            return folder
    return None


async def git_excerpt(workspace: Workspace, confinement: Confinement, limit: int) -> str | None:
    """`git status` and the start of `git diff` of the workspace's repository, if any."""
    folder = _repository(workspace)
    if folder is None:
        return None
    where = workspace.relative(folder)
    prefix = [*_GIT, "-C", where] if where != "." else list(_GIT)
    status = await _git(workspace, confinement, [*prefix, "status", "--short", "--branch"])
    diff = await _git(
        workspace,
        confinement,
        [*prefix, "--no-pager", "diff", "--no-ext-diff", "--no-textconv", "--stat", "--patch"],
    )
    shown = "." if where == "." else f"{where}/"
    text = (
        f"$ git status ({shown})\n{_indented(status)}\n"
        f"$ git diff\n{_indented(diff or '(no unstaged changes)')}"
    )
    return _cut(text, limit)


def _indented(output: str) -> str:
    # a code block: git's own "## branch" line must not read as a heading of the prompt
    return "\n".join(f"    {line}" for line in output.splitlines())


async def _git(workspace: Workspace, confinement: Confinement, argv: list[str]) -> str:
    result = await run_confined(
        argv, root=workspace.root, limit_seconds=_GIT_SECONDS, confinement=confinement
    )
    if result.timed_out:
        return "(git timed out)"
    return result.output.strip()


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
