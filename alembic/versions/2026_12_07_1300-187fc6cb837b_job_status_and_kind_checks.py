"""jobs.status and jobs.kind: CHECK constraints

A job's status and kind are `app.domain.jobs.JobStatus` and `JobKind`; the database
refuses any other value. Every value the application has written is one of these.
The lists are this revision's, not read from the enums: a later change of an enum
comes with a revision of its own.

Revision ID: 187fc6cb837b
Revises: d5a8e2c61f93
Create Date: 2026-12-07 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "187fc6cb837b"
down_revision: str | None = "d5a8e2c61f93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUSES = (
    "draft",
    "queued",
    "running",
    "waiting_human",
    "waiting_subtasks",
    "succeeded",
    "failed",
    "aborted",
    "cancelled",
)
_KINDS = ("chat", "compaction", "summary", "piece")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.create_check_constraint("ck_jobs_status", _one_of("status", _STATUSES))
        batch.create_check_constraint("ck_jobs_kind", _one_of("kind", _KINDS))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("ck_jobs_kind", type_="check")
        batch.drop_constraint("ck_jobs_status", type_="check")
