"""task replay index (items.tool_name) and the task reminder's state on sessions

Revision ID: e1dcb4b5f0ec
Revises: 3cdd7faafcfa
Create Date: 2026-12-02 10:03:28.649281+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "e1dcb4b5f0ec"
down_revision: str | None = "3cdd7faafcfa"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True)
        )
        batch_op.create_index(
            "ix_items_session_tool", ["session_id", "tool_name", "seq"], unique=False
        )

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("llm_requests", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(
            sa.Column(
                "last_task_write_request", sa.Integer(), nullable=False, server_default=sa.text("0")
            )
        )
        batch_op.add_column(
            sa.Column(
                "last_reminder_request", sa.Integer(), nullable=False, server_default=sa.text("0")
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("last_reminder_request")
        batch_op.drop_column("last_task_write_request")
        batch_op.drop_column("llm_requests")

    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index("ix_items_session_tool")
        batch_op.drop_column("tool_name")
