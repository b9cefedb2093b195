"""job kind: one handler per kind, and only piece jobs name a piece

Before, a job's handler was chosen by its piece name (`chat`, `compact`, `summarize`),
so a piece file with one of those names ran an internal handler. Existing rows are
backfilled from those names; internal jobs no longer carry a piece.

Revision ID: c4a9e1f27b3d
Revises: 5b1e7c3d9a20
Create Date: 2026-12-03 07:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "c4a9e1f27b3d"
down_revision: str | None = "5b1e7c3d9a20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FORMER_PIECES = {"chat": "chat", "compact": "compaction", "summarize": "summary"}


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "kind",
                sqlmodel.sql.sqltypes.AutoString(length=20),
                nullable=False,
                server_default="piece",
            )
        )
        batch_op.alter_column(
            "piece", existing_type=sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True
        )
    jobs = sa.table("jobs", sa.column("kind", sa.String), sa.column("piece", sa.String))
    for piece, kind in _FORMER_PIECES.items():
        op.execute(jobs.update().where(jobs.c.piece == piece).values(kind=kind, piece=None))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "kind",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=20),
            server_default=None,
        )


def downgrade() -> None:
    jobs = sa.table("jobs", sa.column("kind", sa.String), sa.column("piece", sa.String))
    for piece, kind in _FORMER_PIECES.items():
        op.execute(jobs.update().where(jobs.c.kind == kind).values(piece=piece))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column(
            "piece", existing_type=sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False
        )
        batch_op.drop_column("kind")
