"""files: the metadata of the files tenants upload

The bytes are stored outside the database, content-addressed per tenant; a row says
what the file is (type, size, pixels or pages, estimated tokens) and which bytes it is
(`sha256`). Listed by tenant and id; a delete asks whether another row of the tenant
still holds the same bytes.

Revision ID: c4f1d9a2b7e3
Revises: c4e7f1a9b2d6
Create Date: 2026-12-07 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4f1d9a2b7e3"
down_revision: str | None = "c4e7f1a9b2d6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=100), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("pages", sa.Integer(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_files_tenant_id", "files", ["tenant", "id"])
    op.create_index("ix_files_tenant_sha256", "files", ["tenant", "sha256"])


def downgrade() -> None:
    op.drop_index("ix_files_tenant_sha256", table_name="files")
    op.drop_index("ix_files_tenant_id", table_name="files")
    op.drop_table("files")
