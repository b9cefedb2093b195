from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from app.db.types import JSONType, UTCDateTime, utcnow


class TenantToolPolicy(SQLModel, table=True):
    """A tenant's layer of tool policy rules (`app.domain.tool_policy`), replaced whole.
    A tenant without a row has no rules."""

    __tablename__ = "tenant_tool_policies"

    tenant: str = Field(primary_key=True, max_length=100)
    rules: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSONType, nullable=False)
    )
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
