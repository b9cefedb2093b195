"""A workspace repository's `git status` and `git diff`, read as data: no program runs.

The git binary honours what a repository holds: `filter.*.clean`/`process` named by
`.gitattributes`, `diff.*.textconv`, `diff.external`, `core.fsmonitor`, hooks,
`core.pager`, `core.sshCommand`, `include.path` and `includeIf` pulling in more of the
same, a `.gitconfig` in HOME, `core.worktree` pointing elsewhere. Any of them, written
by an agent or uploaded by a user, would run a command (outside the sandbox when
bubblewrap is absent) or read past the workspace. So the excerpt does not start git, nor
any other process: this package reads the repository's files itself (HEAD and its refs,
loose and packed objects, the index, `.gitignore`) and compares and diffs them in Python
(difflib). It never reads git configuration, attributes, alternates or `commondir`, so
nothing in a workspace can name a program for it to run; the repository stays what an
uploaded repository should be, data to review. (The other way, git with no system or
global config and a shadow git folder holding a safe config, would have to keep up
with every key a git release adds that names a program, and with `gitdir:` files,
alternates, `commondir` and ownership checks; reading the data leaves no key to miss.
Nor is a git library used: dulwich, for one, runs `filter.*` commands itself.)

Only a real `.git` folder is read (a link, or a `.git` file naming a git folder
elsewhere, is not followed); every file in it and in the work tree is opened without
following links; every path an index or tree names is checked as git checks it; and all
of it runs under a `Budget` of entries looked at, bytes read and lines aligned, so a
hostile repository costs bounded work. What the excerpt cannot read (a SHA-256 or split-index
repository, a missing object) it says in one line instead of failing the movement.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from app.worker.gitdata.diff import diff_text
from app.worker.gitdata.files import Budget, Folder, GitDataError, OverBudget, split
from app.worker.gitdata.index import read_index
from app.worker.gitdata.objects import ObjectStore
from app.worker.gitdata.refs import Head, read_head
from app.worker.gitdata.status import Status, compare, quoted
from app.worker.gitdata.trees import Blob, commit_tree, flatten

__all__ = ["Budget", "Changes", "read_changes"]

_UNREADABLE = (GitDataError, OSError, ValueError, zlib.error, RecursionError, UnicodeError)


@dataclass(frozen=True)
class Changes:
    status: str  # `git status --short --branch`
    diff: str  # `git diff --stat --patch`, empty when nothing is unstaged


def read_changes(root: Path, where: str, budget: Budget, limit: int) -> Changes:
    """The changes of the repository at `where` (relative to the trusted `root`)."""
    try:
        folder = Folder.open(root, split(where), budget)
    except OSError as exc:
        return Changes(f"(not read: {exc.strerror or exc})", "")
    store = ObjectStore(folder)
    try:
        return _changes(folder, store, limit)
    except OverBudget as exc:
        return Changes(f"(stopped: {exc})", "")
    except _UNREADABLE as exc:
        return Changes(f"(not readable as a git repository: {_reason(exc)})", "")
    finally:
        store.close()
        folder.close()


def _changes(folder: Folder, store: ObjectStore, limit: int) -> Changes:
    head = read_head(folder)
    index = read_index(folder)
    committed = _committed(store, head, folder.budget)
    status = Status()
    compare(folder, committed, index, status)
    unstaged = [
        (change, index.entries[change.path])
        for change in status.changes
        if change.unstaged in "MDTA" and change.path in index.entries
    ]
    return Changes(_status_text(head, status), diff_text(folder, store, unstaged, limit))


def _committed(store: ObjectStore, head: Head, budget: Budget) -> dict[str, Blob]:
    if head.commit is None:
        return {}
    return flatten(store, commit_tree(store, head.commit), budget)


def _status_text(head: Head, status: Status) -> str:
    if head.branch is None:
        lines = ["## HEAD (no branch)"]
    elif head.commit is None:
        lines = [f"## No commits yet on {head.branch}"]
    else:
        lines = [f"## {head.branch}"]
    lines += [f"{c.staged}{c.unstaged} {quoted(c.path)}" for c in status.changes]
    lines += [f"?? {quoted(path)}" for path in status.untracked]
    if status.stopped:
        lines.append(f"(stopped: {status.stopped})")
    return "\n".join(lines)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "folders nested too deep"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)[:200]
