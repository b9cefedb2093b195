"""The migrations are the schema: they run both ways and match the SQLModel tables."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

import app.db.models  # noqa: F401  (registers every table on SQLModel.metadata)
from app.db.engine import Database
from app.db.fulltext import in_models
from app.db.migrate import downgrade_to_base, head_revision, upgrade_to_head
from app.db.models import Item
from app.db.models.item import AppendedItem
from app.domain.jobs import JobKind, JobStatus
from app.settings import Settings

APPLICATION_TABLES = {"api_keys", "items", "sessions"}


def table_names(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def schema_differences(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        opts = {"compare_type": True, "include_object": in_models}
        context = MigrationContext.configure(connection, opts=opts)
        return list(compare_metadata(context, SQLModel.metadata))


def test_upgrade_creates_every_table_at_head(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)

    assert APPLICATION_TABLES <= table_names(sync_engine)
    with sync_engine.connect() as connection:
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert version == head_revision()


def test_downgrade_to_base_leaves_no_application_tables(
    fresh_url: str, sync_engine: Engine
) -> None:
    upgrade_to_head(fresh_url)

    downgrade_to_base(fresh_url)

    assert table_names(sync_engine) <= {"alembic_version"}


def test_upgrade_works_again_after_downgrade(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)
    downgrade_to_base(fresh_url)

    upgrade_to_head(fresh_url)

    assert APPLICATION_TABLES <= table_names(sync_engine)
    assert schema_differences(sync_engine) == []


def test_models_match_the_migrations(fresh_url: str, sync_engine: Engine) -> None:
    upgrade_to_head(fresh_url)

    assert schema_differences(sync_engine) == []


@pytest.mark.sqlite_only
async def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    """Reads (on the event loop) wait briefly for a lock, the writer as configured."""
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'fresh.db'}",
        data_dir=tmp_path / "data",
        sqlite_busy_timeout_ms=4321,
        sqlite_read_busy_timeout_ms=123,
    )
    database = Database(settings)

    async def pragmas(db: Any) -> tuple[Any, ...]:
        connection = await db.connection()
        found = []
        for name in ("journal_mode", "foreign_keys", "busy_timeout"):
            found.append((await connection.execute(text(f"PRAGMA {name}"))).scalar())
        return tuple(found)

    try:
        read = await database.read_unit(pragmas)
        written = await database.write(pragmas)
    finally:
        await database.dispose()

    assert read == ("wal", 1, 123)
    assert written == ("wal", 1, 4321)


@pytest.mark.sqlite_only
async def test_a_new_sqlite_file_is_in_wal_before_its_first_connection_opens(
    tmp_path: Path,
) -> None:
    """Were each new connection to switch the file to WAL, the first connections to a
    fresh file (the writer's, a read's) could fail each other at once with "database is
    locked", and with them the first `POST /sessions` after start, now and then."""
    path = tmp_path / "rollback.db"
    plain = sqlite3.connect(path)
    plain.execute("CREATE TABLE t (x INTEGER)")
    plain.commit()
    assert plain.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    plain.close()

    database = Database(
        Settings(_env_file=None, database_url=f"sqlite:///{path}", data_dir=tmp_path / "data")
    )
    try:
        check = sqlite3.connect(path)
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        check.close()
    finally:
        await database.dispose()


@pytest.mark.sqlite_only
async def test_a_new_sqlite_file_switches_to_wal_after_a_write_in_its_old_mode_ends(
    tmp_path: Path,
) -> None:
    """Another connection in the midst of a write (another process migrating it, say)
    makes SQLite refuse the switch at once, busy timeout or not: it is retried."""
    path = tmp_path / "rollback.db"
    writing = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writing.execute("CREATE TABLE t (x INTEGER)")
    writing.execute("BEGIN IMMEDIATE")
    writing.execute("INSERT INTO t VALUES (1)")
    ends = threading.Timer(0.2, lambda: writing.execute("COMMIT"))
    ends.start()

    try:
        database = Database(
            Settings(_env_file=None, database_url=f"sqlite:///{path}", data_dir=tmp_path / "d")
        )
        await database.dispose()
    finally:
        ends.join()
        writing.close()

    check = sqlite3.connect(path)
    assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert check.execute("SELECT x FROM t").fetchall() == [(1,)]
    check.close()


@pytest.mark.postgresql_only
def test_postgresql_primary_keys_are_generated_by_the_database(
    fresh_url: str, sync_engine: Engine
) -> None:
    """`BigIntPK` columns autoincrement on PostgreSQL too (bigserial: a sequence default)."""
    upgrade_to_head(fresh_url)

    columns = inspect(sync_engine).get_columns
    for table, column in (("items", "id"), ("jobs", "number"), ("events", "id")):
        (found,) = [c for c in columns(table) if c["name"] == column]
        assert str(found["type"]) == "BIGINT", (table, column)
        assert "nextval(" in str(found["default"]), (table, column)


def test_an_appended_item_lists_every_column_of_the_items_table_but_its_id() -> None:
    columns = [c.name for c in Item.__table__.columns if c.name != "id"]  # type: ignore[attr-defined]

    assert list(AppendedItem._fields) == columns


def _insert_session(connection: Any) -> None:
    """Session `s` of tenant `t`, by SQL: the model may have columns an older schema lacks."""
    connection.execute(
        text(
            "INSERT INTO sessions (id, tenant, metadata, last_seq, current_turn, "
            "current_segment, input_tokens, output_tokens, cache_read_tokens, "
            "cache_creation_tokens, llm_requests, last_task_write_request, "
            "last_reminder_request, source, created_at, updated_at) VALUES ('s', 't', "
            "'{}', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'strata', '2026-01-01', '2026-01-01')"
        )
    )


def test_the_job_kind_is_backfilled_from_the_old_piece_names(
    fresh_url: str, sync_engine: Engine
) -> None:
    """Chat, compaction and summary jobs were told apart by their piece name."""
    from alembic import command

    from app.db.migrate import alembic_config

    command.upgrade(alembic_config(fresh_url), "5b1e7c3d9a20")
    with sync_engine.begin() as connection:
        _insert_session(connection)
        for number, piece in enumerate(["chat", "compact", "summarize", "default"], start=1):
            connection.execute(
                text(
                    "INSERT INTO jobs (number, id, tenant, session_id, piece, lane, status, "
                    "state, input, input_tokens, output_tokens, cache_read_tokens, "
                    "cache_creation_tokens, attempts, cancel_requested, created_at, updated_at) "
                    "VALUES (:n, :id, 't', 's', :piece, 'session', 'succeeded', '{}', '{}', "
                    "0, 0, 0, 0, 0, false, '2026-01-01', '2026-01-01')"
                ),
                {"n": number, "id": f"job_{piece}", "piece": piece},
            )

    upgrade_to_head(fresh_url)

    with sync_engine.connect() as connection:
        rows = connection.execute(text("SELECT id, kind, piece FROM jobs ORDER BY number"))
        assert [tuple(row) for row in rows] == [
            ("job_chat", "chat", None),
            ("job_compact", "compaction", None),
            ("job_summarize", "summary", None),
            ("job_default", "piece", "default"),
        ]


def test_a_turns_second_of_the_day_is_backfilled_from_its_end(
    fresh_url: str, sync_engine: Engine
) -> None:
    """The detail look-up by time of day reads `ended_second`: turns stored before it
    existed get it from `ended_at`, as each dialect stores that."""
    from datetime import UTC, datetime

    import sqlalchemy as sa
    from alembic import command

    from app.db.migrate import alembic_config
    from app.db.types import UTCDateTime

    command.upgrade(alembic_config(fresh_url), "b8d2e6f4a1c7")
    ends = [
        datetime(2026, 3, 29, 0, 0, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 10, 25, 23, 59, 59, tzinfo=UTC),
    ]
    turns = sa.table(
        "memory_turns",
        *(sa.column(name) for name in ("session_id", "origin_session_id", "turn")),
        *(sa.column(name) for name in ("user_text", "assistant_text", "l1_fallback")),
        *(sa.column(name, UTCDateTime()) for name in ("ended_at", "created_at", "updated_at")),
    )
    with sync_engine.begin() as connection:
        _insert_session(connection)
        for turn, ended_at in enumerate(ends, start=1):
            connection.execute(
                turns.insert().values(
                    session_id="s", origin_session_id="s", turn=turn, user_text="",
                    assistant_text="", l1_fallback=False, ended_at=ended_at,
                    created_at=ended_at, updated_at=ended_at,
                )
            )  # fmt: skip

    upgrade_to_head(fresh_url)

    with sync_engine.connect() as connection:
        rows = connection.execute(text("SELECT ended_second FROM memory_turns ORDER BY turn"))
        assert [row[0] for row in rows] == [0, 7199, 86399]


def test_a_subtasks_root_and_depth_are_backfilled_from_its_parents(
    fresh_url: str, sync_engine: Engine
) -> None:
    """Subtasks made before jobs knew their tree get it from their chain of parents."""
    from alembic import command

    from app.db.migrate import alembic_config

    command.upgrade(alembic_config(fresh_url), "f2a9c4d71e58")
    chain = [("job_root", None), ("job_child", "job_root"), ("job_grandchild", "job_child")]
    with sync_engine.begin() as connection:
        _insert_session(connection)
        # newest first, so a level's parent is not always the row before it
        for number, (job_id, parent) in reversed(list(enumerate(chain, start=1))):
            connection.execute(
                text(
                    "INSERT INTO jobs (number, id, tenant, session_id, kind, piece, lane, "
                    "status, state, input, input_tokens, output_tokens, cache_read_tokens, "
                    "cache_creation_tokens, attempts, cancel_requested, parent_job_id, "
                    "created_at, updated_at) VALUES (:n, :id, 't', 's', 'piece', 'default', "
                    "'session', 'succeeded', '{}', '{}', 0, 0, 0, 0, 0, false, :parent, "
                    "'2026-01-01', '2026-01-01')"
                ),
                {"n": number, "id": job_id, "parent": parent},
            )

    upgrade_to_head(fresh_url)

    with sync_engine.connect() as connection:
        rows = connection.execute(text("SELECT id, root_job_id, depth FROM jobs ORDER BY number"))
        assert [tuple(row) for row in rows] == [
            ("job_root", None, 0),
            ("job_child", "job_root", 1),
            ("job_grandchild", "job_root", 2),
        ]


def _insert_job(connection: Any, number: int, *, status: str, kind: str) -> None:
    """Job `job_<number>` of session `s`, by SQL (as a row the application never wrote)."""
    connection.execute(
        text(
            "INSERT INTO jobs (number, id, tenant, session_id, kind, lane, status, "
            "state, input, input_tokens, output_tokens, cache_read_tokens, "
            "cache_creation_tokens, attempts, cancel_requested, created_at, updated_at) "
            "VALUES (:n, :id, 't', 's', :kind, 'session', :status, '{}', '{}', "
            "0, 0, 0, 0, 0, false, '2026-01-01', '2026-01-01')"
        ),
        {"n": number, "id": f"job_{number}", "kind": kind, "status": status},
    )


def test_the_database_refuses_a_job_status_that_is_no_job_status(
    fresh_url: str, sync_engine: Engine
) -> None:
    upgrade_to_head(fresh_url)
    with sync_engine.begin() as connection:
        _insert_session(connection)

    with pytest.raises(IntegrityError), sync_engine.begin() as connection:
        _insert_job(connection, 1, status="finished", kind="chat")


def test_the_database_refuses_a_job_kind_that_is_no_job_kind(
    fresh_url: str, sync_engine: Engine
) -> None:
    upgrade_to_head(fresh_url)
    with sync_engine.begin() as connection:
        _insert_session(connection)
        _insert_job(connection, 1, status="queued", kind="chat")

    with pytest.raises(IntegrityError), sync_engine.begin() as connection:
        connection.execute(text("UPDATE jobs SET kind = 'compact' WHERE number = 1"))


def test_jobs_of_every_status_and_kind_keep_their_values_through_the_checks(
    fresh_url: str, sync_engine: Engine
) -> None:
    """The revision that adds the CHECK constraints takes every row written before it."""
    from alembic import command

    from app.db.migrate import alembic_config

    command.upgrade(alembic_config(fresh_url), "d5a8e2c61f93")
    rows = [(status.value, kind.value) for status in JobStatus for kind in JobKind]
    with sync_engine.begin() as connection:
        _insert_session(connection)
        for number, (status, kind) in enumerate(rows, start=1):
            _insert_job(connection, number, status=status, kind=kind)

    upgrade_to_head(fresh_url)

    with sync_engine.connect() as connection:
        found = connection.execute(text("SELECT status, kind FROM jobs ORDER BY number"))
        assert [tuple(row) for row in found] == rows
