"""memory_turns.ended_second

A detail look-up by time of day matches on every day of a chain, so it read one index
range of `ended_at` per day: 543 ranges (and ~1,150 bind parameters) for a chain of
543 days, 12-37 ms. The second of the UTC day a turn ended in, indexed per session,
makes it one range per UTC offset of the display zone (one or two).

Revision ID: f2a9c4d71e58
Revises: b8d2e6f4a1c7
Create Date: 2026-12-04 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f2a9c4d71e58"
down_revision: str | None = "b8d2e6f4a1c7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the second of the UTC day, from what each dialect stores (SQLite: the UTC text
# `YYYY-MM-DD HH:MM:SS.ffffff`, read by position: its date functions round to milliseconds)
_BACKFILL = {
    "sqlite": "CAST(substr(ended_at, 12, 2) AS INTEGER) * 3600 "
    "+ CAST(substr(ended_at, 15, 2) AS INTEGER) * 60 + CAST(substr(ended_at, 18, 2) AS INTEGER)",
    "postgresql": "CAST(floor(EXTRACT(EPOCH FROM ended_at)) AS BIGINT) % 86400",
}


def upgrade() -> None:
    with op.batch_alter_table("memory_turns") as batch:
        batch.add_column(
            sa.Column("ended_second", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
    dialect = op.get_bind().dialect.name
    op.execute(f"UPDATE memory_turns SET ended_second = {_BACKFILL[dialect]}")
    op.create_index(
        "ix_memory_turns_session_second", "memory_turns", ["session_id", "ended_second"]
    )


def downgrade() -> None:
    op.drop_index("ix_memory_turns_session_second", table_name="memory_turns")
    with op.batch_alter_table("memory_turns") as batch:
        batch.drop_column("ended_second")
