"""A commit's tree, flattened to the paths it holds (as the index lists them)."""

from __future__ import annotations

from dataclasses import dataclass

from app.worker.gitdata.files import Budget, GitDataError, tracked_path
from app.worker.gitdata.objects import ObjectStore

TREE_MODE = 0o040000


@dataclass(frozen=True)
class Blob:
    mode: int
    sha: str


def commit_tree(store: ObjectStore, commit: str) -> str:
    _, data = store.get(commit, "commit")
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"tree ") or len(first) != 45:
        raise GitDataError(f"commit {commit[:12]} does not start with its tree")
    return first[5:].decode("ascii")


def flatten(store: ObjectStore, tree: str, budget: Budget) -> dict[str, Blob]:
    """Every non-tree entry below `tree`, by its full path."""
    found: dict[str, Blob] = {}
    pending = [(tree, "")]
    while pending:
        sha, prefix = pending.pop()
        for mode, name, child in _entries(store.get(sha, "tree")[1]):
            path = tracked_path((prefix + name).encode("utf-8", "surrogateescape"))
            if path is None:
                continue  # git refuses such a path too; nothing of it is read
            budget.take_file()
            if mode == TREE_MODE:
                pending.append((child, path + "/"))
            else:
                found[path] = Blob(mode, child)
    return found


def _entries(data: bytes) -> list[tuple[int, str, str]]:
    entries: list[tuple[int, str, str]] = []
    at = 0
    while at < len(data):
        space = data.find(b" ", at)
        end = data.find(b"\0", space + 1)
        if space < 0 or end < 0 or end + 21 > len(data):
            raise GitDataError("a malformed tree")
        try:
            mode = int(data[at:space], 8)
        except ValueError as exc:
            raise GitDataError("a tree entry with a malformed mode") from exc
        name = data[space + 1 : end].decode("utf-8", "surrogateescape")
        entries.append((mode, name, data[end + 1 : end + 21].hex()))
        at = end + 21
    return entries
