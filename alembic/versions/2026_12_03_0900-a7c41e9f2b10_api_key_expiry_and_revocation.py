"""api key expiry and revocation

`strata keys create --expires-in` sets `expires_at`; `strata keys revoke` sets `revoked_at`.
A key past either is refused; its row stays, so the server never falls back to the keyless
local tenant because every key was revoked.

Revision ID: a7c41e9f2b10
Revises: c4e7a91f2b36
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c41e9f2b10"
down_revision: str | None = "c4e7a91f2b36"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("revoked_at")
        batch.drop_column("expires_at")
