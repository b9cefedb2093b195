"""The tool policies revision: a tenant's rules table, a session's rules column, both ways
(the conventions of tests/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from alembic import command
from sqlalchemy import Engine, inspect, text

from app.db.migrate import alembic_config, upgrade_to_head

BEFORE = "187fc6cb837b"
REVISION = "a7c3e91f4d26"


def _insert_session(connection: Any) -> None:
    """Session `s` of tenant `t`, by SQL, as the schema before the revision has it."""
    connection.execute(
        text(
            "INSERT INTO sessions (id, tenant, metadata, last_seq, current_turn, "
            "current_segment, input_tokens, output_tokens, cache_read_tokens, "
            "cache_creation_tokens, llm_requests, last_task_write_request, "
            "last_reminder_request, source, created_at, updated_at) VALUES ('s', 't', '{}', "
            "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'strata', '2026-01-01', '2026-01-01')"
        )
    )


def test_a_session_made_before_tool_policies_has_no_rules(
    fresh_url: str, sync_engine: Engine
) -> None:
    command.upgrade(alembic_config(fresh_url), BEFORE)
    with sync_engine.begin() as connection:
        _insert_session(connection)

    upgrade_to_head(fresh_url)

    with sync_engine.connect() as connection:
        rules = connection.execute(text("SELECT tool_policy FROM sessions")).scalar_one()
        tenants = connection.execute(text("SELECT count(*) FROM tenant_tool_policies")).scalar()
    assert (rules, tenants) == (None, 0)


def test_the_tool_policies_revision_goes_back_to_what_was(
    fresh_url: str, sync_engine: Engine
) -> None:
    command.upgrade(alembic_config(fresh_url), REVISION)

    command.downgrade(alembic_config(fresh_url), BEFORE)

    assert "tenant_tool_policies" not in inspect(sync_engine).get_table_names()
    columns = {column["name"] for column in inspect(sync_engine).get_columns("sessions")}
    assert "tool_policy" not in columns
