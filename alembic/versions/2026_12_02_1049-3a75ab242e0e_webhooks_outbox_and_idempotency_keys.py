"""webhooks outbox and idempotency keys

Revision ID: 3a75ab242e0e
Revises: 81329e7e6ce8
Create Date: 2026-12-02 10:49:53.043193+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "3a75ab242e0e"
down_revision: str | None = "81329e7e6ce8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("method", sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
        sa.Column("path", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column("body_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column(
            "response",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "key"),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index("ix_idempotency_keys_expires", ["expires_at"], unique=False)

    op.create_table(
        "webhook_subscriptions",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("tenant", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column(
            "events",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("description", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("secret", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_subscriptions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_webhook_subscriptions_tenant"), ["tenant"], unique=False
        )

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("subscription_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["subscription_id"], ["webhook_subscriptions.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_webhook_deliveries_due", ["status", "next_attempt_at"], unique=False
        )
        batch_op.create_index(
            "ix_webhook_deliveries_subscription", ["subscription_id", "created_at"], unique=False
        )

    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("delivery_id", sa.String(length=40), nullable=False),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["delivery_id"], ["webhook_deliveries.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_webhook_attempts_delivery", ["delivery_id", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_attempts_delivery")

    op.drop_table("webhook_attempts")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_deliveries_subscription")
        batch_op.drop_index("ix_webhook_deliveries_due")

    op.drop_table("webhook_deliveries")
    with op.batch_alter_table("webhook_subscriptions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_subscriptions_tenant"))

    op.drop_table("webhook_subscriptions")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_idempotency_keys_expires")

    op.drop_table("idempotency_keys")
