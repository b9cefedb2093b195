"""The full-text index of memory, as its migration (`memory_full_text`) makes it: objects the
database keeps beside the ORM models (SQLite: FTS5 tables and their triggers;
PostgreSQL: a generated `search` column and its GIN index on each table), which schema
comparisons leave out."""

from __future__ import annotations

from typing import Any

FTS_TABLES = ("memory_turns_fts", "memory_details_fts")
# FTS5 keeps an external-content table's index in these shadow tables
_SHADOWS = ("data", "idx", "docsize", "config")
OUTSIDE_TABLES = frozenset(
    {*FTS_TABLES, *(f"{table}_{shadow}" for table in FTS_TABLES for shadow in _SHADOWS)}
)
OUTSIDE_INDEXES = frozenset({"ix_memory_turns_search", "ix_memory_details_search"})
SEARCH_COLUMN = "search"
SEARCH_TABLES = frozenset({"memory_turns", "memory_details"})


def in_models(obj: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's `include_object`: False for the index's objects, which no model declares."""
    if kind == "table":
        return name not in OUTSIDE_TABLES
    if kind == "index":
        return name not in OUTSIDE_INDEXES
    if kind == "column" and name == SEARCH_COLUMN:
        return getattr(obj, "table", None) is None or obj.table.name not in SEARCH_TABLES
    return True
