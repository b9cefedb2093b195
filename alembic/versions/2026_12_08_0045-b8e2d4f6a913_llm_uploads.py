"""llm_uploads: the Anthropic Files API id of each stored file, per account

With STRATA_LLM_USE_FILES_API on, an image or PDF a request carries is uploaded to the
Files API once and named by its id after; a row keeps that id for the file and the
account it was uploaded with (a hash of the API key and base URL), so a restart or
another process finds it. Its rows go with their file.

Revision ID: b8e2d4f6a913
Revises: f3a8c2d91e47
Create Date: 2026-12-08 00:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b8e2d4f6a913"
down_revision: str | None = "f3a8c2d91e47"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "llm_uploads",
        sa.Column("file_id", sa.String(length=40), nullable=False),
        sa.Column("account", sa.String(length=64), nullable=False),
        sa.Column("remote_id", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("file_id", "account"),
    )


def downgrade() -> None:
    op.drop_table("llm_uploads")
