"""layered memory (L1/L2 turns, L3 details), session chains, idempotent imports, job lanes

Revision ID: 7f42380838d8
Revises: e1dcb4b5f0ec
Create Date: 2026-12-02 10:15:27.271107+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "7f42380838d8"
down_revision: str | None = "e1dcb4b5f0ec"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_turns",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("origin_session_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_text", sa.Text(), nullable=False),
        sa.Column("assistant_text", sa.Text(), nullable=False),
        sa.Column("l1", sa.Text(), nullable=True),
        sa.Column("l1_fallback", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("origin_session_id", "turn", name="uq_memory_turns_origin_turn"),
    )
    with op.batch_alter_table("memory_turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memory_turns_session_ended", ["session_id", "ended_at"], unique=False
        )

    op.create_table(
        "memory_details",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("turn_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("origin_session_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("source_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["turn_id"], ["memory_turns.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("origin_session_id", "source_id", name="uq_memory_details_source"),
    )
    with op.batch_alter_table("memory_details", schema=None) as batch_op:
        batch_op.create_index("ix_memory_details_turn", ["turn_id"], unique=False)

    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("source_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )
        batch_op.create_unique_constraint("uq_items_session_source", ["session_id", "source_id"])

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "lane",
                sqlmodel.sql.sqltypes.AutoString(length=20),
                nullable=False,
                server_default="session",
            )
        )

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("continues_from", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True)
        )
        batch_op.add_column(
            sa.Column("merged_into", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                "parent_session_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True
            )
        )
        batch_op.add_column(
            sa.Column(
                "source",
                sqlmodel.sql.sqltypes.AutoString(length=20),
                nullable=False,
                server_default="strata",
            )
        )
        batch_op.add_column(
            sa.Column("external_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )
        batch_op.add_column(
            sa.Column("project", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True)
        )
        batch_op.create_index(
            batch_op.f("ix_sessions_continues_from"), ["continues_from"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_sessions_parent_session_id"), ["parent_session_id"], unique=False
        )
        batch_op.create_index("ix_sessions_project", ["tenant", "project"], unique=False)
        batch_op.create_unique_constraint(
            "uq_sessions_external", ["tenant", "source", "external_id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_sessions_external", type_="unique")
        batch_op.drop_index("ix_sessions_project")
        batch_op.drop_index(batch_op.f("ix_sessions_parent_session_id"))
        batch_op.drop_index(batch_op.f("ix_sessions_continues_from"))
        batch_op.drop_column("project")
        batch_op.drop_column("external_id")
        batch_op.drop_column("source")
        batch_op.drop_column("parent_session_id")
        batch_op.drop_column("merged_into")
        batch_op.drop_column("continues_from")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("lane")

    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_constraint("uq_items_session_source", type_="unique")
        batch_op.drop_column("source_id")

    with op.batch_alter_table("memory_details", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_details_turn")

    op.drop_table("memory_details")
    with op.batch_alter_table("memory_turns", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_turns_session_ended")

    op.drop_table("memory_turns")
