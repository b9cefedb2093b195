"""memory_turns.started_at

A detail look-up matched a turn by its end only: the time a prompt was typed found nothing,
and a range found only the turns that ended inside it. A turn's start (its first item, the
prompt) makes the look-up match the span it covers. Turns projected before keep NULL (their
span is their end); `ADD COLUMN` of a nullable column leaves the table (and its full-text
triggers) in place on SQLite.

Revision ID: a7d3e5c91b24
Revises: c4f1d9a2b7e3
Create Date: 2026-12-07 21:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7d3e5c91b24"
down_revision: str | None = "c4f1d9a2b7e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "memory_turns", sa.Column("started_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("memory_turns", "started_at")
