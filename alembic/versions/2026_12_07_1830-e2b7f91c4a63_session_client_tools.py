"""session client tools: the tools a session's client offers and runs

Revision ID: e2b7f91c4a63
Revises: c61d4a8e0b57
Create Date: 2026-12-07 18:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e2b7f91c4a63"
down_revision: str | None = "c61d4a8e0b57"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    # a nullable column: added in place, no copy of the sessions table
    op.add_column("sessions", sa.Column("client_tools", json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("client_tools")
