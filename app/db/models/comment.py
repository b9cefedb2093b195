from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, String, Text
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, UTCDateTime, utcnow


class Comment(SQLModel, table=True):
    """A human's or agent's message on a job: how a job asks and is answered."""

    __tablename__ = "job_comments"
    __table_args__ = (Index("ix_job_comments_job", "job_id", "id"),)

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    job_id: str = Field(
        sa_column=Column(String(40), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False)
    )
    author: str = Field(max_length=20)  # user | agent | system
    body: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
