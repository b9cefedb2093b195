"""The README and docs stay true: the quick start, the configuration reference and the links."""

from __future__ import annotations

import re
from pathlib import Path

from tools import config_reference

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def test_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]

    assert "make serve" in quick_start
    assert "make test" in quick_start


def test_configuration_reference_and_env_example_are_generated_from_the_settings() -> None:
    stale = config_reference.stale_files()

    assert stale == [], f"{stale} differ from app/settings.py: run `make docs`"


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


def test_readme_is_a_first_page_and_the_reference_lives_in_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    assert len(readme.splitlines()) <= README_MAX_LINES
    for page in ("api", "tasks", "jobs-and-pieces", "memory", "webhooks", "configuration"):
        assert f"(docs/{page}.md" in readme, page


def test_every_relative_link_of_the_docs_names_a_file_that_exists() -> None:
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for doc in docs:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if path and not (doc.parent / path).exists():
                broken.append(f"{doc.name}: {target}")

    assert broken == []
