"""session lineage: forks and rewinds read their logs without copying them; items by turn

Revision ID: f3a8c2d91e47
Revises: a7d3e5c91b24
Create Date: 2026-12-07 21:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f3a8c2d91e47"
down_revision: str | None = "a7d3e5c91b24"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    # nullable columns: added in place, no copy of the sessions table
    op.add_column("sessions", sa.Column("lineage", json, nullable=True))
    op.add_column("sessions", sa.Column("forked_from", sa.String(length=40), nullable=True))
    op.add_column("sessions", sa.Column("fork_seq", sa.Integer(), nullable=True))
    op.create_index("ix_sessions_forked_from", "sessions", ["forked_from"])
    # a turn's items are read by a fork's or rewind's point: an index range
    op.create_index("ix_items_session_turn", "items", ["session_id", "turn", "seq"])


def downgrade() -> None:
    op.drop_index("ix_items_session_turn", table_name="items")
    op.drop_index("ix_sessions_forked_from", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("fork_seq")
        batch.drop_column("forked_from")
        batch.drop_column("lineage")
