"""webhook secret rotation: the secret a subscription had, valid for a while

After a rotation a subscription signs with its new secret and, until
`previous_secret_until`, with the one before it too (Standard Webhooks sends several
signatures), so a receiver can switch without rejecting a delivery.

Revision ID: c41e7d2a9b53
Revises: a7c3e91f4d26
Create Date: 2026-12-07 18:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c41e7d2a9b53"
down_revision: str | None = "a7c3e91f4d26"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # nullable columns: added in place
    op.add_column(
        "webhook_subscriptions",
        sa.Column("previous_secret", sa.String(length=200), nullable=True),
    )
    op.add_column(
        "webhook_subscriptions",
        sa.Column("previous_secret_until", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    with op.batch_alter_table("webhook_subscriptions") as batch:
        batch.drop_column("previous_secret_until")
        batch.drop_column("previous_secret")
