"""The engine stays on its side of the boundary.

`app.engine` is the agent loop, pieces, the tool registry and the workspace: it is
driven by the worker and offered tools through its registry, and must not reach back
into what drives it (`app.tools`, say). A test keeps any such import out, at module
level or inside a function, and under `TYPE_CHECKING` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import app.engine

FORBIDDEN = ("app.tools", "app.worker", "app.services", "app.db")


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, absolute (the engine imports nothing relatively)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import hides where it leads"
            module = node.module or ""
            names += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return names


def _forbidden(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in FORBIDDEN)


def test_nothing_in_the_engine_imports_the_tools_worker_services_or_database() -> None:
    root = Path(app.engine.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert files

    found = {
        f"{path.relative_to(root)}: {name}"
        for path in files
        for name in _imports(path)
        if _forbidden(name)
    }

    assert not found, sorted(found)


def test_the_scan_sees_an_import_of_the_tools_inside_a_function(tmp_path: Path) -> None:
    """The check above would pass vacuously if the scan missed imports."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from app.tools.sandbox import Confinement\n")

    assert any(_forbidden(name) for name in _imports(module))
