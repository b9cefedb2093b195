"""The README stays true: its quick start and configuration table match the code."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _env_names() -> list[str]:
    names = []
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        names.append(str(choices[-1]) if choices else f"STRATA_{field_name.upper()}")
    return names


def test_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]

    assert "make serve" in quick_start
    assert "make test" in quick_start


def test_readme_configuration_table_names_every_setting() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in _env_names() if f"`{name}`" not in table]

    assert missing == []


def test_ci_runs_exactly_make_test() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")

    assert "make test" in script.splitlines()[-1]


def test_the_quick_start_reaches_an_agents_answer() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]

    assert "export ANTHROPIC_API_KEY=" in quick_start
    assert "/messages?wait=true" in quick_start
    assert quick_start.index("ANTHROPIC_API_KEY") < quick_start.index("make serve")


def test_project_docs_point_at_nothing_outside_the_repository() -> None:
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

    assert ROOT / "docs" / "ARCHITECTURE.md" in docs
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        assert "../shared" not in text and "shared/DESIGN" not in text, doc.name
