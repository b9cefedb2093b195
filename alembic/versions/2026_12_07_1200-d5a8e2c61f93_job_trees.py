"""jobs.root_job_id, jobs.depth, jobs.tree_movements

A subtask had no limit of depth and a movement budget of its own: a tree of subtasks
could spawn without end, each child running its full `max_movements`. A job now knows
its tree's root and its depth below it, and a root counts the movements begun in its
whole tree against its own budget.

Existing subtasks get their root and depth from their parents, level by level; the
movements their trees ran before are not counted (each tree starts at 0).

Revision ID: d5a8e2c61f93
Revises: f2a9c4d71e58
Create Date: 2026-12-07 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d5a8e2c61f93"
down_revision: str | None = "f2a9c4d71e58"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# one level of the tree per run: the children of jobs that know their place already
_BACKFILL_LEVEL = """
UPDATE jobs SET
    root_job_id = (SELECT COALESCE(p.root_job_id, p.id) FROM jobs p WHERE p.id = jobs.parent_job_id),
    depth = (SELECT p.depth + 1 FROM jobs p WHERE p.id = jobs.parent_job_id)
WHERE root_job_id IS NULL
  AND parent_job_id IS NOT NULL
  AND EXISTS (
      SELECT 1 FROM jobs p
      WHERE p.id = jobs.parent_job_id AND (p.parent_job_id IS NULL OR p.root_job_id IS NOT NULL)
  )
"""


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("root_job_id", sa.String(length=40), nullable=True))
        batch.add_column(
            sa.Column("depth", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(
            sa.Column("tree_movements", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
    bind = op.get_bind()
    while bind.execute(sa.text(_BACKFILL_LEVEL)).rowcount:
        pass


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("tree_movements")
        batch.drop_column("depth")
        batch.drop_column("root_job_id")
