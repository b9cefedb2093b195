from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.db.types import UTCDateTime, utcnow


class ApiKey(SQLModel, table=True):
    """A tenant's API key. Only its SHA-256 is stored; the key is shown once at creation.

    A revoked or expired key is refused but its row stays: as long as any row exists the
    server keeps requiring keys (it never falls back to the keyless local tenant)."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=40)
    tenant: str = Field(index=True, max_length=100)
    key_hash: str = Field(unique=True, max_length=64)
    prefix: str = Field(max_length=20)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
