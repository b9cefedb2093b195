"""memory_details.is_error

An L3 tool output says whether the tool failed, as the tool result did: a detail look-up
showed failed commands as if they had succeeded.

Revision ID: c4e7a91f2b36
Revises: c4a9e1f27b3d
Create Date: 2026-12-03 08:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4e7a91f2b36"
down_revision: str | None = "c4a9e1f27b3d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory_details") as batch:
        batch.add_column(
            sa.Column("is_error", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("memory_details") as batch:
        batch.drop_column("is_error")
