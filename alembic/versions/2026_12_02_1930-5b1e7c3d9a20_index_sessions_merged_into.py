"""index sessions.merged_into

Memory reads gather the sessions merged into a chain's sessions (whose turns may not all
have moved yet, a merge moves them in chunks after it is decided).

Revision ID: 5b1e7c3d9a20
Revises: d9b0d65d4d48
Create Date: 2026-12-02 19:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "5b1e7c3d9a20"
down_revision: str | None = "d9b0d65d4d48"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_sessions_merged_into"), "sessions", ["merged_into"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_merged_into"), table_name="sessions")
