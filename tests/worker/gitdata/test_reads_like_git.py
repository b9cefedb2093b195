"""The excerpt, read without git, says what git says (run here config-free, as reference).

Each case builds a repository with the real git and compares the excerpt's status, its
`--stat` and its patch with git's own output: loose and packed objects (offset and
reference deltas), index versions 2 to 4, staged and unstaged changes, an unborn and a
detached HEAD, ignore rules, links, binary files, type changes, untracked folders.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gitrepo import Repo, read

Build = Callable[[Repo], None]


def _numbered(count: int) -> list[str]:
    return [f"line {number}\n" for number in range(count)]


def modified_and_new(repo: Repo) -> None:
    repo.write("a.txt", "one\ntwo\n")
    repo.commit()
    repo.write("a.txt", "one\ntwo\nthree\n")
    repo.write("new.txt", "x")


def packed_with_offset_deltas(repo: Repo) -> None:
    lines = _numbered(2000)
    for commit in range(5):
        lines[commit * 100] = f"changed {commit}\n"
        repo.write("big.txt", "".join(lines))
        repo.write(f"d/f{commit}.txt", str(commit))
        repo.commit(f"c{commit}")
    repo.git("gc", "-q", "--aggressive")
    lines[1500] = "CHANGED\n"
    repo.write("big.txt", "".join(lines))
    os.remove(repo.root / "d" / "f1.txt")


def packed_with_reference_deltas(repo: Repo) -> None:
    lines = _numbered(500)
    for commit in range(6):
        lines[commit * 50] = f"changed {commit}\n"
        repo.write("big.txt", "".join(lines))
        repo.commit(f"c{commit}")
    repo.git("-c", "repack.useDeltaBaseOffset=false", "repack", "-q", "-adf")
    lines[400] = "X\n"
    repo.write("big.txt", "".join(lines))


def staged_and_unstaged(repo: Repo) -> None:
    for name in "abc":
        repo.write(name, f"{name}\n")
    repo.commit()
    repo.write("a", "staged\n")
    repo.git("add", "a")
    repo.write("a", "then changed again\n")
    repo.git("rm", "-q", "b")
    repo.write("n", "new\n")
    repo.git("add", "n")
    repo.git("rm", "-q", "--cached", "c")


def no_commits_yet(repo: Repo) -> None:
    repo.write("x", "1")
    repo.git("add", "x")
    repo.write("y/z", "2")


def detached_head(repo: Repo) -> None:
    repo.write("x", "1\n")
    repo.commit()
    repo.write("x", "2\n")
    repo.commit()
    repo.git("checkout", "-q", "HEAD~1")
    repo.write("x", "3")


def ignore_rules(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\nbuild/\n!keep.log\n/rootonly\ndocs/**/*.tmp\n[ab]?.o\n")
    repo.commit()
    for path in (
        "a.log",
        "keep.log",
        "build/x",
        "sub/build/y",
        "rootonly",
        "sub/rootonly",
        "docs/a/b/c.tmp",
        "docs/a/ok.md",
        "only-ignored/z.log",
        "a1.o",
        "c1.o",
    ):
        repo.write(path, "x")
    repo.write("sub/.gitignore", "!*.log\n")
    repo.write("sub/q.log", "q")
    repo.write(".git/info/exclude", "excluded*\n")
    repo.write("excluded.txt", "e")


def index_version_4(repo: Repo) -> None:
    for number in range(30):
        repo.write(f"dir/sub{number % 3}/file{number}.txt", f"{number}\n")
    repo.commit()
    repo.git("update-index", "--index-version", "4")
    repo.write("dir/sub1/file4.txt", "changed\n")


def links(repo: Repo) -> None:
    repo.write("t.txt", "t\n")
    os.symlink("t.txt", repo.root / "link")
    repo.commit()
    os.remove(repo.root / "link")
    os.symlink("elsewhere", repo.root / "link")
    os.symlink("/etc", repo.root / "new-link")


def no_newline_at_end(repo: Repo) -> None:
    repo.write("a", "x\ny")
    repo.commit()
    repo.write("a", "x\nz")


def carriage_returns(repo: Repo) -> None:
    repo.write("a", "x\r\ny\r\n")
    repo.commit()
    repo.write("a", "x\r\nz\r\n")


def binary_file(repo: Repo) -> None:
    repo.write("b.bin", b"\0\1\2")
    repo.commit()
    repo.write("b.bin", b"\0\1\3\4")


def deleted_file(repo: Repo) -> None:
    repo.write("a", "1\n2\n")
    repo.commit()
    os.remove(repo.root / "a")


def nested_repository(repo: Repo) -> None:
    repo.write("a", "1")
    repo.commit()
    Repo(repo.root / "inner", repo.root.parent / "inner-home").init()
    (repo.root / "inner" / "f").write_text("x")


def unusual_names(repo: Repo) -> None:
    repo.write("tab\there", "1")
    repo.write('quo"te', "2")
    repo.write("ünï.txt", "3")


def intent_to_add(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.commit()
    repo.write("b", "2\n")
    repo.git("add", "-N", "b")


def skip_worktree_and_assume_unchanged(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.write("b", "1\n")
    repo.commit()
    repo.git("update-index", "--skip-worktree", "a")
    repo.git("update-index", "--assume-unchanged", "b")
    os.remove(repo.root / "a")
    repo.write("b", "22\n")


def link_replaces_file(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.commit()
    os.remove(repo.root / "a")
    os.symlink("x", repo.root / "a")


def executable_bit(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.commit()
    os.chmod(repo.root / "a", 0o755)


def same_size_rewrite(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.commit()
    repo.write("a", "2\n")


def folder_replaces_file(repo: Repo) -> None:
    repo.write("a", "1\n")
    repo.commit()
    os.remove(repo.root / "a")
    repo.write("a/inner", "x")


def file_replaces_folder(repo: Repo) -> None:
    repo.write("d/x", "1\n")
    repo.write("d/y", "1\n")
    repo.commit()
    shutil.rmtree(repo.root / "d")
    repo.write("d", "file")


def empty_folders(repo: Repo) -> None:
    repo.write("a", "1")
    repo.commit()
    (repo.root / "empty" / "deeper").mkdir(parents=True)


def many_files(repo: Repo) -> None:
    for number in range(300):
        repo.write(f"f{number:03}", f"{number}\n")
    repo.commit()
    for number in range(0, 300, 7):
        repo.write(f"f{number:03}", "changed\n")


def merge_conflict(repo: Repo) -> None:
    repo.write("a", "base\n")
    repo.commit()
    repo.git("checkout", "-q", "-b", "other")
    repo.write("a", "other\n")
    repo.commit()
    repo.git("checkout", "-q", "main")
    repo.write("a", "mine\n")
    repo.commit()
    repo.git("config", "user.name", "t")  # the merge below fails, as it should
    with pytest.raises(Exception, match="merge"):
        repo.git("merge", "-q", "other")


CASES: list[Build] = [
    modified_and_new,
    packed_with_offset_deltas,
    packed_with_reference_deltas,
    staged_and_unstaged,
    no_commits_yet,
    detached_head,
    ignore_rules,
    index_version_4,
    links,
    no_newline_at_end,
    carriage_returns,
    binary_file,
    deleted_file,
    nested_repository,
    unusual_names,
    intent_to_add,
    skip_worktree_and_assume_unchanged,
    link_replaces_file,
    executable_bit,
    same_size_rewrite,
    folder_replaces_file,
    file_replaces_folder,
    empty_folders,
    many_files,
]


def built(tmp_path: Path, build: Build) -> Repo:
    repo = Repo(tmp_path / "repo", tmp_path / "home").init()
    build(repo)
    return repo


@pytest.mark.parametrize("build", [*CASES, merge_conflict], ids=lambda build: build.__name__)
def test_the_status_is_git_s(tmp_path: Path, build: Build) -> None:
    repo = built(tmp_path, build)

    assert read(repo.root).status == repo.status()


@pytest.mark.parametrize("build", CASES, ids=lambda build: build.__name__)
def test_the_patch_is_git_s(tmp_path: Path, build: Build) -> None:
    repo = built(tmp_path, build)

    diff = read(repo.root).diff

    assert diff.partition("\n\n")[2] == repo.diff("--patch")


@pytest.mark.parametrize("build", CASES, ids=lambda build: build.__name__)
def test_the_stat_is_git_s(tmp_path: Path, build: Build) -> None:
    repo = built(tmp_path, build)

    diff = read(repo.root).diff

    assert diff.partition("\n\n")[0] == repo.diff("--stat")
