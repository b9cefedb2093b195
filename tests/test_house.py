"""The house's rules, as tests.

One write path: every statement a module outside `app/db` runs goes through a
repository. No ORM session call (`db.add`, `db.exec`, `db.get` …) outside `app/db`, and no
module there imports a repository's prepared statement to run it itself.

Tests mirror the house: a test lives in the folder of the package it tests (`tests/db`
for `app/db`, `tests/worker/gitdata` for `app/worker/gitdata` …), or in one of a few
folders that are not `app/`'s (`NOT_APP_FOLDERS`); the `tests/` root holds at most
`MAX_ROOT_TEST_FILES` files, the whole project's rules and `app/`'s own root modules.

The house's other rules are tested where their package's tests live:
- the engine imports nothing of what drives it: `tests/engine/test_import_boundary.py`;
- the problem-type prefix is spelled in the domain only: `tests/api/test_problem_types.py`;
- no service holds the LLM port (the model's calls are the worker's):
  `tests/services/test_no_llm_call.py`;
- one statement budget per agent step and per one-request turn, counted, not timed:
  `tests/worker/test_statement_budget.py`.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

from app.db.prepared import Prepared

TESTS = Path(__file__).resolve().parent
APP = TESTS.parent / "app"
SESSION_CALLS = frozenset(
    {
        "add",
        "add_all",
        "execute",
        "get",
        "exec",
        "delete",
        "flush",
        "merge",
        "refresh",
        "scalar",
        "scalars",
    }
)
SESSION_TYPES = frozenset({"AsyncSession", "SessionDep"})
SESSION_NAME = "db"  # what the code calls a unit of work's session, annotated or not


def _outside_db() -> list[Path]:
    return sorted(p for p in APP.rglob("*.py") if (APP / "db") not in p.parents)


def _session_names(tree: ast.AST) -> set[str]:
    """The names the module gives sessions: parameters annotated `AsyncSession`, and
    what `async with ….read() as name` binds."""
    names = {SESSION_NAME}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if any(
                (isinstance(part, ast.Name) and part.id in SESSION_TYPES)
                or (isinstance(part, ast.Attribute) and part.attr in SESSION_TYPES)
                for part in ast.walk(node.annotation)
            ):
                names.add(node.arg)
        if isinstance(node, ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "read"
                    and isinstance(item.optional_vars, ast.Name)
                ):
                    names.add(item.optional_vars.id)
    return names


def session_calls() -> list[str]:
    found = []
    for path in _outside_db():
        tree = ast.parse(path.read_text(), str(path))
        names = _session_names(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in SESSION_CALLS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in names
            ):
                where = f"{path.relative_to(APP.parent)}:{node.lineno}"
                found.append(f"{where} {node.func.value.id}.{node.func.attr}")
    return found


def prepared_imports() -> list[str]:
    found = []
    for path in _outside_db():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if not node.module.startswith("app.db"):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if isinstance(getattr(module, alias.name, None), Prepared):
                    where = f"{path.relative_to(APP.parent)}:{node.lineno}"
                    found.append(f"{where} {node.module}.{alias.name}")
    return found


# Markers a comment or docstring uses only to tell history: what the code was ("used to
# be", "previously", "formerly"), an issue or defect by number, a commit by its hash (7 to
# 40 hex digits, letters and digits both). Figures of past runs live in bench/RESULTS.md
# and the story of a change in its commit.
HISTORY = re.compile(
    r"used to be|\bpreviously\b|\bformerly\b|\bissue #?\d+|\bdefect \d+|(?<![\w-])#\d+\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
    re.IGNORECASE,
)


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string that stands as a statement (the
    docstrings) of `source`."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.append((node.lineno, node.value.value))
    return found


def history_in_prose() -> list[str]:
    found = []
    for path in sorted(APP.rglob("*.py")):
        for line, text in _prose(path.read_text()):
            for match in HISTORY.finditer(text):
                found.append(f"{path.relative_to(APP.parent)}:{line} {match.group()!r}")
    return found


def test_no_orm_session_call_outside_the_repositories() -> None:
    assert session_calls() == []


def test_no_prepared_statement_is_run_outside_the_repositories() -> None:
    assert prepared_imports() == []


MAX_ROOT_TEST_FILES = 8
NOT_APP_FOLDERS = frozenset(
    {
        "bench",  # bench/, the benchmarks' harness
        "clients",  # clients/, the generated API clients
        "e2e",  # real processes end to end
        "fakes",  # the fake Messages API
        "fixtures",  # recorded data the tests read
        "fuzz",  # the OpenAPI document fuzzed
        "integrations",  # integrations/, the Claude Code kit
        "support",  # helpers the tests share
    }
)


def misplaced_test_folders() -> list[str]:
    """Folders holding tests that are neither one of `app/`'s packages, at the same path,
    nor inside one of `NOT_APP_FOLDERS`."""
    folders = {path.parent.relative_to(TESTS) for path in TESTS.rglob("test_*.py")}
    folders |= {path.relative_to(TESTS) for path in TESTS.iterdir() if path.is_dir()}
    found = []
    for folder in sorted(folders):
        if folder == Path(".") or folder.name == "__pycache__":
            continue
        if folder.parts[0] in NOT_APP_FOLDERS:
            continue
        if not (APP / folder / "__init__.py").is_file():
            found.append(f"tests/{folder}")
    return found


def test_the_tests_root_holds_a_handful_of_files() -> None:
    root = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert len(root) <= MAX_ROOT_TEST_FILES, root


def test_every_test_folder_is_a_package_of_app_or_named_as_another_kind() -> None:
    assert misplaced_test_folders() == []


def test_no_comment_or_docstring_in_app_tells_history() -> None:
    """Comments and docstrings say what is and why; what was lives in git."""
    assert history_in_prose() == []
