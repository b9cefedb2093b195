"""memory full-text index: L1/L2 of turns, L3 of details

A model (or a person) looks up "where did we decide X" by words, not by a time it already
knows. The index is kept by the database itself in the statement that writes the text (the
projection of a turn, an L1 summary, a merge, a deletion), so no writer can forget it:

- SQLite: two external-content FTS5 tables (`memory_turns_fts` over `user_text`,
  `assistant_text`, `l1`; `memory_details_fts` over `text`) with triggers on insert,
  update of the indexed columns, and delete; the rowid is the row's `id`.
- PostgreSQL: a stored generated `tsvector` column `search` (the `simple` configuration:
  no stemming, as FTS5's `unicode61`; punctuation read as spaces, as FTS5 reads it) on each
  table, with a GIN index. A `tsvector` holds at most 1 MB, so each text is indexed on
  its first `_INDEXED_CHARS` characters.

Both are built for the rows already there. The objects live outside the ORM models
(`app.db.fulltext.OUTSIDE_MODELS`). A later SQLite migration that rebuilds `memory_turns`
or `memory_details` (`batch_alter_table` copies a table) drops their triggers with the old
table and must create them again.

Revision ID: c4e7f1a9b2d6
Revises: e2b7f91c4a63
Create Date: 2026-12-07 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "c4e7f1a9b2d6"
down_revision: str | None = "e2b7f91c4a63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# PostgreSQL indexes this many characters of a text at most (a tsvector's 1 MB bound)
_INDEXED_CHARS = 100_000

# PostgreSQL's parser keeps `name.txt`, `a/b/c`, `x-y` or `user@host` as one token where
# FTS5's `unicode61` sees words; punctuation made spaces, both see the same words (the
# query's terms get the same, `app.db.repositories.memory_search`)
PUNCTUATION = "[[:punct:]]+"

# (table, its FTS5 table, the indexed columns)
_SQLITE = (
    ("memory_turns", "memory_turns_fts", ("user_text", "assistant_text", "l1")),
    ("memory_details", "memory_details_fts", ("text",)),
)

_POSTGRESQL = (
    (
        "memory_turns",
        "user_text || ' ' || assistant_text || ' ' || coalesce(l1, '')",
        "ix_memory_turns_search",
    ),
    ("memory_details", "text", "ix_memory_details_search"),
)


def _sqlite_upgrade() -> None:
    for table, fts, columns in _SQLITE:
        names = ", ".join(columns)
        new = ", ".join(f"new.{c}" for c in columns)
        old = ", ".join(f"old.{c}" for c in columns)
        remove = f"INSERT INTO {fts}({fts}, rowid, {names}) VALUES ('delete', old.id, {old});"
        add = f"INSERT INTO {fts}(rowid, {names}) VALUES (new.id, {new});"
        op.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5({names}, content='{table}', "
            "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
        )
        op.execute(f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} BEGIN {add} END")
        op.execute(f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} BEGIN {remove} END")
        op.execute(
            f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {names} ON {table} "
            f"BEGIN {remove} {add} END"
        )
        op.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")  # the rows already there


def _postgresql_upgrade() -> None:
    for table, text, index in _POSTGRESQL:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN search tsvector GENERATED ALWAYS AS "
            f"(to_tsvector('simple'::regconfig, regexp_replace(left({text}, {_INDEXED_CHARS}), "
            f"'{PUNCTUATION}', ' ', 'g'))) STORED"
        )
        op.execute(f"CREATE INDEX {index} ON {table} USING gin (search)")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_upgrade()
    else:
        _sqlite_upgrade()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, _text, index in _POSTGRESQL:
            op.execute(f"DROP INDEX {index}")
            op.execute(f"ALTER TABLE {table} DROP COLUMN search")
        return
    for _table, fts, _columns in _SQLITE:
        for event in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER {fts}_{event}")
        op.execute(f"DROP TABLE {fts}")
