from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.db.types import UTCDateTime, utcnow


class LlmUpload(SQLModel, table=True):
    """A stored file (`StoredFile`) uploaded to the Anthropic Files API: the id it has
    there, for one account (`account`: a hash of the API key and base URL, never the key),
    so the file is uploaded once per account, across restarts and processes."""

    __tablename__ = "llm_uploads"

    file_id: str = Field(primary_key=True, max_length=40)
    account: str = Field(primary_key=True, max_length=64)
    remote_id: str = Field(max_length=500)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
