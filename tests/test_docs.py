"""The README and docs stay true: the quick start, the configuration reference and the links."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import config_reference, mkdocs_hooks

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
BUILD_WITHIN = 300.0  # seconds; the site builds in about 10 s on an idle machine
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


@pytest.mark.sqlite_only  # no database: the PostgreSQL run would only repeat it
def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, or any other warning, fails it."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=BUILD_WITHIN,
        check=False,
    )

    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "getting-started.html").is_file()


def test_the_site_links_published_files_to_their_pages() -> None:
    assert mkdocs_hooks.site_link("docs/api.md#event-streams", "index.md") == (
        "api.md#event-streams"
    )
    assert mkdocs_hooks.site_link("../README.md#console", "console.md") == "index.md#console"
    assert mkdocs_hooks.site_link("RESULTS.md", "benchmarks.md") == "benchmark-results.md"


def test_the_site_leaves_other_links_as_written() -> None:
    assert mkdocs_hooks.site_link("tasks.md", "api.md") == "tasks.md"
    assert (
        mkdocs_hooks.site_link("https://example.com/x.md", "api.md") == "https://example.com/x.md"
    )
    assert mkdocs_hooks.site_link("../app/settings.py", "api.md") == "../app/settings.py"


def test_the_site_rewrites_no_link_inside_a_code_block() -> None:
    markdown = "[a](docs/api.md)\n```text\n[b](docs/api.md)\n```\n"

    assert mkdocs_hooks.rewrite_links(markdown, "index.md") == (
        "[a](api.md)\n```text\n[b](docs/api.md)\n```\n"
    )
