"""HEAD, the branch it names, and the commit that branch points at.

A ref name is checked before it becomes a path (`refs/…`, no `..`, no empty or dotted
component), so `HEAD` cannot make the reader open anything outside the git folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.worker.gitdata.files import Folder, GitDataError

GIT = ".git"
_SHA = re.compile(r"[0-9a-f]{40}")
_SYMBOLIC = "ref: "
_REF_PART = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\]+")
_MAX_REF_BYTES = 4096
_MAX_LINKS = 5


@dataclass(frozen=True)
class Head:
    branch: str | None  # None: detached
    commit: str | None  # None: no commits yet


def valid_ref(name: str) -> bool:
    parts = name.split("/")
    return (
        len(parts) >= 2
        and parts[0] == "refs"
        and all(
            _REF_PART.fullmatch(part) and not part.startswith(".") and not part.endswith(".lock")
            for part in parts
        )
        and ".." not in name
        and "@{" not in name
    )


def read_head(folder: Folder) -> Head:
    text = _ref_text(folder, "HEAD")
    if text is None:
        raise GitDataError("the repository has no HEAD")
    if _SHA.fullmatch(text):
        return Head(None, text)
    name = _symbolic(text)
    branch = name.removeprefix("refs/heads/")
    return Head(branch, resolve(folder, name))


def resolve(folder: Folder, name: str) -> str | None:
    """The commit `name` points at, following symbolic refs; None if it does not exist."""
    for _ in range(_MAX_LINKS):
        text = _ref_text(folder, name)
        if text is None:
            return _packed(folder, name)
        if _SHA.fullmatch(text):
            return text
        name = _symbolic(text)
    raise GitDataError("symbolic refs that lead on too long")


def _symbolic(text: str) -> str:
    if not text.startswith(_SYMBOLIC):
        raise GitDataError("a ref that is neither an object id nor a symbolic ref")
    name = text[len(_SYMBOLIC) :].strip()
    if not valid_ref(name):
        raise GitDataError(f"a symbolic ref to an invalid name {name[:80]!r}")
    return name


def _ref_text(folder: Folder, name: str) -> str | None:
    try:
        raw = folder.read([GIT, *name.split("/")], _MAX_REF_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except GitDataError:
        return None  # a folder where a loose ref would be (refs/heads/a with a/b refs)
    return raw.decode("utf-8", "replace").strip()


def _packed(folder: Folder, name: str) -> str | None:
    try:
        raw = folder.read([GIT, "packed-refs"])
    except FileNotFoundError:
        return None
    for line in raw.decode("utf-8", "replace").splitlines():
        sha, _, ref = line.partition(" ")
        if ref.strip() == name and _SHA.fullmatch(sha):
            return sha
    return None
