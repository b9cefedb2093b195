"""MkDocs hooks of the documentation site (`mkdocs.yml` names this file).

- A few pages live outside `docs/` because they are read where they are (the README on the
  repository's front page, CONTRIBUTING.md, the benchmarks' README and results beside their
  code): they are published from there (`PUBLISHED`), not copied.
- Links are written for the repository (`docs/api.md` in the README, `../README.md` in a
  page of docs/); each one that names a published file is rewritten to the site's page, so
  the same Markdown reads right on a forge and on the site. A link to any other file outside
  docs/ is left as written, and the strict build fails on it.
- A page of docs/ that the nav does not list is appended under "More", so that a new page
  is on the site (and checked) before anyone places it.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
# repository path → the page's path on the site
PUBLISHED = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "contributing.md",
    "bench/README.md": "benchmarks.md",
    "bench/RESULTS.md": "benchmark-results.md",
}
UNLISTED_SECTION = "More"
LINK = re.compile(r"(!?\[[^\]\n]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^\s*(```|~~~)")
log = logging.getLogger("mkdocs.hooks.strata")


def _listed(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_listed(entry) for entry in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_listed(entry) for entry in nav.values())) if nav else set()
    return set()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    docs = Path(config.docs_dir)
    pages = sorted(path.relative_to(docs).as_posix() for path in docs.rglob("*.md"))
    unlisted = [page for page in pages if page not in _listed(config.nav)]
    if unlisted and config.nav is not None:
        log.info("pages not in mkdocs.yml's nav, shown under %r: %s", UNLISTED_SECTION, unlisted)
        config.nav.append({UNLISTED_SECTION: unlisted})
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for source, uri in PUBLISHED.items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    return files


def _repository_path(page_uri: str) -> str:
    for source, uri in PUBLISHED.items():
        if uri == page_uri:
            return source
    return f"docs/{page_uri}"


def site_link(target: str, page_uri: str) -> str:
    """`target`, a link of the page at `page_uri` as written for the repository, as the
    site needs it."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return target
    path, hash_, anchor = target.partition("#")
    if not path:
        return target
    here = posixpath.dirname(_repository_path(page_uri))
    named = posixpath.normpath(posixpath.join(here, path))
    if named in PUBLISHED:
        on_site = PUBLISHED[named]
    elif named.startswith("docs/"):
        on_site = named.removeprefix("docs/")
    else:
        return target
    relative = posixpath.relpath(on_site, posixpath.dirname(page_uri) or ".")
    return f"{relative}{hash_}{anchor}"


def rewrite_links(markdown: str, page_uri: str) -> str:
    """Every link and image outside code blocks, through `site_link`."""
    out = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            line = LINK.sub(lambda m: m[1] + site_link(m[2], page_uri) + m[3], line)
        out.append(line)
    return "".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return rewrite_links(markdown, page.file.src_uri)
