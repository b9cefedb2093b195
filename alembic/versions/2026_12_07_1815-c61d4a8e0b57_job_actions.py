"""job actions: tool calls that wait for a person

One row per tool call a policy's `ask` held, written with its job's move to
`waiting_human`; resolved by a person or by its expiry.

Revision ID: c61d4a8e0b57
Revises: c4e7b9d2a615
Create Date: 2026-12-07 18:15:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c61d4a8e0b57"
down_revision: str | None = "c4e7b9d2a615"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "job_actions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("tool_use_id", sa.String(length=100), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("input", _json(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("layer", sa.String(length=20), nullable=True),
        sa.Column("rule_index", sa.Integer(), nullable=True),
        sa.Column("rule", _json(), nullable=True),
        sa.Column("on_timeout", sa.String(length=20), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("decision", sa.String(length=20), nullable=True),
        sa.Column("decided_input", _json(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'resolved', 'expired', 'cancelled')",
            name="ck_job_actions_status",
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_job_actions_job", "job_actions", ["job_id", "created_at"])
    op.create_index("ix_job_actions_status_expires", "job_actions", ["status", "expires_at"])


def downgrade() -> None:
    op.drop_index("ix_job_actions_status_expires", table_name="job_actions")
    op.drop_index("ix_job_actions_job", table_name="job_actions")
    op.drop_table("job_actions")
