"""pieces: comments and job movement state

Revision ID: 81329e7e6ce8
Revises: 7f42380838d8
Create Date: 2026-12-02 10:36:46.606086+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "81329e7e6ce8"
down_revision: str | None = "7f42380838d8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_comments",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("author", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("job_comments", schema=None) as batch_op:
        batch_op.create_index("ix_job_comments_job", ["job_id", "id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("instruction", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("movement", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                "state",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=False,
                server_default="{}",
            )
        )
        batch_op.add_column(
            sa.Column("parent_job_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_jobs_parent_job_id"), ["parent_job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_parent_job_id"))
        batch_op.drop_column("parent_job_id")
        batch_op.drop_column("state")
        batch_op.drop_column("movement")
        batch_op.drop_column("instruction")

    with op.batch_alter_table("job_comments", schema=None) as batch_op:
        batch_op.drop_index("ix_job_comments_job")

    op.drop_table("job_comments")
