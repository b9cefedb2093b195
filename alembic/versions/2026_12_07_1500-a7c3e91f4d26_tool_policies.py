"""tool policies: a tenant's rules, a session's rules

The tenant's layer of tool policy rules is one row per tenant, replaced whole; the
session's layer is a column of its row, read with it at a turn's start. A tenant
without a row and a session whose column is null have no rules.

Revision ID: a7c3e91f4d26
Revises: 187fc6cb837b
Create Date: 2026-12-07 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "a7c3e91f4d26"
down_revision: str | None = "187fc6cb837b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tenant_tool_policies",
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("rules", _json(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant"),
    )
    # a nullable column: added in place, no copy of the sessions table
    op.add_column("sessions", sa.Column("tool_policy", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("tool_policy")
    op.drop_table("tenant_tool_policies")
