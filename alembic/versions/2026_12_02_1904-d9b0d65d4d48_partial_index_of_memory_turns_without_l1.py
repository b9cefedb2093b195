"""partial index of memory turns without L1

The end-of-turn summary check counts a chain's turns still waiting for their L1
summary; this index holds exactly those turns.

Revision ID: d9b0d65d4d48
Revises: 3a75ab242e0e
Create Date: 2026-12-02 19:04:11.065998+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d9b0d65d4d48"
down_revision: str | None = "3a75ab242e0e"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory_turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memory_turns_without_l1",
            ["session_id", "ended_at"],
            unique=False,
            sqlite_where=sa.text("l1 IS NULL"),
            postgresql_where=sa.text("l1 IS NULL"),
        )


def downgrade() -> None:
    with op.batch_alter_table("memory_turns", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_turns_without_l1")
