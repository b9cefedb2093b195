"""The memory full-text revision: turns and details stored before it are found after it,
and it goes back to what was (the conventions of tests/db/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from alembic import command
from sqlalchemy import Engine, inspect, text

from app.db.migrate import alembic_config, upgrade_to_head

BEFORE = "a7c3e91f4d26"
REVISION = "c4e7f1a9b2d6"
_SEARCH = {
    "sqlite": (
        "SELECT rowid FROM memory_turns_fts WHERE memory_turns_fts MATCH :q",
        "SELECT rowid FROM memory_details_fts WHERE memory_details_fts MATCH :q",
    ),
    "postgresql": (
        "SELECT id FROM memory_turns WHERE search @@ plainto_tsquery('simple', :q)",
        "SELECT id FROM memory_details WHERE search @@ plainto_tsquery('simple', :q)",
    ),
}


def _insert_turn_and_detail(connection: Any) -> None:
    """Session `s` with one turn (id 7) and one detail (id 9), by SQL, as before the revision."""
    connection.execute(
        text(
            "INSERT INTO sessions (id, tenant, metadata, last_seq, current_turn, "
            "current_segment, input_tokens, output_tokens, cache_read_tokens, "
            "cache_creation_tokens, llm_requests, last_task_write_request, "
            "last_reminder_request, source, created_at, updated_at) VALUES ('s', 't', '{}', "
            "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'strata', '2026-01-01', '2026-01-01')"
        )
    )
    connection.execute(
        text(
            "INSERT INTO memory_turns (id, session_id, origin_session_id, turn, ended_at, "
            "ended_second, user_text, assistant_text, l1, l1_fallback, created_at, updated_at) "
            "VALUES (7, 's', 's', 1, '2026-01-01', 0, 'which queue?', 'we chose postgresql', "
            "'a summary of walruses', false, '2026-01-01', '2026-01-01')"
        )
    )
    connection.execute(
        text(
            "INSERT INTO memory_details (id, turn_id, origin_session_id, kind, source_id, "
            "tool_name, is_error, text) VALUES (9, 7, 's', 'tool_output', 'toolu_1', 'Bash', "
            "false, 'zanzibar.txt')"
        )
    )


def test_turns_and_details_stored_before_the_index_are_found_after_it(
    fresh_url: str, sync_engine: Engine
) -> None:
    command.upgrade(alembic_config(fresh_url), BEFORE)
    with sync_engine.begin() as connection:
        _insert_turn_and_detail(connection)

    upgrade_to_head(fresh_url)

    turns, details = _SEARCH[sync_engine.dialect.name]
    with sync_engine.connect() as connection:
        found = [
            connection.execute(text(turns), {"q": "postgresql"}).scalars().all(),
            connection.execute(text(turns), {"q": "walruses"}).scalars().all(),
            connection.execute(text(details), {"q": "zanzibar"}).scalars().all(),
        ]
    assert found == [[7], [7], [9]]


def test_the_full_text_revision_goes_back_to_what_was(fresh_url: str, sync_engine: Engine) -> None:
    command.upgrade(alembic_config(fresh_url), REVISION)

    command.downgrade(alembic_config(fresh_url), BEFORE)

    tables = set(inspect(sync_engine).get_table_names())
    assert not {t for t in tables if t.endswith("_fts") or "_fts_" in t}
    for table in ("memory_turns", "memory_details"):
        columns = {column["name"] for column in inspect(sync_engine).get_columns(table)}
        assert "search" not in columns
