"""Full-text search of memory: the user's words made into an index query, and the one
line a hit shows.

A query is words and `"quoted phrases"`; every one of them must occur (in any order).
Nothing in it is an operator: FTS5's `AND`/`OR`/`NOT`/`NEAR`, `*`, `^`, `:`, `-` and
parentheses, and tsquery's `&`, `|`, `!`, `<->`, are words or separators like any other
punctuation, so no query is a syntax error. Each term reaches the index as a phrase
(FTS5: a double-quoted string, its quotes doubled; PostgreSQL: `phraseto_tsquery`), so
the index's own tokenizer splits it as it split the text (`don't` is the phrase `don t`).
A term without a letter or digit matches nothing in either index and is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Layer", "SearchText", "fts5_query", "hit_line", "parse_query", "rank_word"]

_TERM = re.compile(r'"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+")


class Layer(StrEnum):
    l1 = "L1"
    l2 = "L2"
    l3 = "L3"


@dataclass(frozen=True)
class SearchText:
    """One text of a hit: its layer, the label its line is shown with, the text."""

    layer: Layer
    label: str
    text: str


def parse_query(query: str, *, max_terms: int) -> list[str]:
    """The terms of a query, at most `max_terms` (the first ones): quoted phrases and bare
    words, each with at least one letter or digit; an unclosed quote runs to the end."""
    terms: list[str] = []
    for match in _TERM.finditer(query):
        term = " ".join((match.group(1) if match.group(1) is not None else match.group(2)).split())
        if any(c.isalnum() for c in term) and term not in terms:
            terms.append(term)
    return terms[:max_terms]


def fts5_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression requiring every term, each as a quoted phrase."""
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms)


def rank_word(term: str) -> str:
    """The word of a term whose occurrences rank a hit (SQLite): its longest, casefolded."""
    return max(_words(term), key=len, default=term.casefold())


def _words(term: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(term)]


def hit_line(texts: Sequence[SearchText], terms: Sequence[str], width: int) -> tuple[Layer, str]:
    """The line a hit shows: of the texts' lines, the first with the most terms in it (a term
    is in a line when all its words are), `label: line`, cut to about `width` characters
    around its first match. No line holds a term (the index's tokenizer and this one
    disagree, e.g. on accents): the first line of the first text that has one."""
    wanted = [words for words in map(_words, terms) if words]
    best: tuple[int, SearchText, str] | None = None
    first: tuple[SearchText, str] | None = None
    for text in texts:
        for raw in text.text.splitlines():
            line = raw.strip()
            if not line:
                continue
            if first is None:
                first = (text, line)
            folded = line.casefold()
            score = sum(all(w in folded for w in words) for words in wanted)
            if score and (best is None or score > best[0]):
                best = (score, text, line)
    if best is not None:
        _, chosen, line = best
    elif first is not None:
        chosen, line = first
    else:
        return (texts[0].layer if texts else Layer.l2), ""
    return chosen.layer, f"{chosen.label}: {_around(line, wanted, width)}"


def _around(line: str, wanted: Sequence[Sequence[str]], width: int) -> str:
    """The line cut to `width` characters, keeping its first match in view."""
    if len(line) <= width:
        return line
    folded = line.casefold()
    found = [folded.find(words[0]) for words in wanted if words and words[0] in folded]
    at = min(found, default=0)
    start = max(0, min(at - width // 4, len(line) - width))
    cut = line[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(line) else "")
