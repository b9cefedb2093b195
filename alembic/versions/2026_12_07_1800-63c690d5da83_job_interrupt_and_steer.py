"""jobs.interrupt_requested, jobs.steer

An interrupt is a cancel the user asked for a turn: the job's end says so
(`interrupted`) and closes its open tool calls as interrupted by the user. A steer is
a queued chat message the running turn of its session takes at its next step instead
of as a turn of its own.

Revision ID: 63c690d5da83
Revises: c41e7d2a9b53
Create Date: 2026-12-07 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "63c690d5da83"
down_revision: str | None = "c41e7d2a9b53"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column(
                "interrupt_requested", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
        batch.add_column(
            sa.Column("steer", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("steer")
        batch.drop_column("interrupt_requested")
