"""mcp servers: a tenant's MCP servers over Streamable HTTP, a session's attached ones

One row per tenant and server name; `headers` hold the server's credentials. A session's
attached servers are a nullable column of its row, read with it at a turn's start.

Revision ID: c4e7b9d2a615
Revises: 63c690d5da83
Create Date: 2026-12-07 18:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c4e7b9d2a615"
down_revision: str | None = "63c690d5da83"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("headers", _json(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        sa.Column("tool_filter", _json(), nullable=False),
        sa.Column("trusted", sa.Boolean(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name"),
    )
    # a nullable column: added in place, no copy of the sessions table
    op.add_column("sessions", sa.Column("mcp", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("mcp")
    op.drop_table("mcp_servers")
