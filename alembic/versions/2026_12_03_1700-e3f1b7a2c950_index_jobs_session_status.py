"""index jobs by session, status and number

A runner's claim skips a queued job when its session has an earlier active job; that
look-up (and "is this session busy?") filtered a session's jobs by status through the
`(session_id, number)` index, walking every job the session ever ran: with 20,000
finished turns in one session a claim took 66 ms on SQLite's writer, holding the write
lock. By `(session_id, status, number)` it is a few index seeks whatever the history.

Revision ID: e3f1b7a2c950
Revises: a7c41e9f2b10
Create Date: 2026-12-03 17:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "e3f1b7a2c950"
down_revision: str | None = "a7c41e9f2b10"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_session_status_number", "jobs", ["session_id", "status", "number"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_session_status_number", table_name="jobs")
