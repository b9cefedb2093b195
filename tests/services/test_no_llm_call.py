"""Services are use cases that read and write: none holds the LLM port, so none can call
the model. The summary model's calls outside the agent loop (compaction, L1 summaries)
are the worker's (`app/worker`)."""

from __future__ import annotations

import ast
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "app" / "services"
LLM_MODULES = ("app.engine.anthropic", "app.observability.metered_llm", "anthropic")


def llm_imports() -> list[str]:
    found = []
    for path in sorted(SERVICES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = {alias.name for alias in node.names}
                if node.module in LLM_MODULES or (
                    node.module == "app.engine.llm" and "LLM" in names
                ):
                    found.append(f"{path.name}:{node.lineno} {node.module}")
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.name}:{node.lineno} {alias.name}"
                    for alias in node.names
                    if alias.name in LLM_MODULES or alias.name == "app.engine.llm"
                ]
    return found


def test_no_service_imports_the_llm() -> None:
    assert llm_imports() == []
