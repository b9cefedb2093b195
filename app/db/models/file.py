from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index
from sqlmodel import Field, SQLModel

from app.db.types import UTCDateTime, utcnow


class StoredFile(SQLModel, table=True):
    """A file a tenant uploaded (`POST /files`): its metadata. The bytes live outside the
    database, content-addressed per tenant (`app.services.file_store`): two rows of one
    tenant with the same `sha256` share one copy."""

    __tablename__ = "files"
    __table_args__ = (
        Index("ix_files_tenant_id", "tenant", "id"),
        Index("ix_files_tenant_sha256", "tenant", "sha256"),
    )

    id: str = Field(primary_key=True, max_length=40)
    tenant: str = Field(max_length=100)
    filename: str = Field(max_length=255)
    media_type: str = Field(max_length=100)
    size: int = Field(sa_type=BigInteger)
    sha256: str = Field(max_length=64)
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    tokens: int
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
