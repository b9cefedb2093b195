"""API keys of the caller's tenant, as the API shows them: never the key, except once."""

from __future__ import annotations

from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from app.db.models import ApiKey


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{}]})

    expires_at: AwareDatetime | None = Field(
        default=None,
        description="When the key stops working (null: never); in the future, with its zone.",
    )


class ApiKeyPublic(BaseModel):
    id: str = Field(description="The key's id (`key_…`), not the key.")
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, row: ApiKey) -> ApiKeyPublic:
        return cls.model_validate(row, from_attributes=True)


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="The key (`sk_strata_…`). Shown only in this response.")


class ApiKeyList(BaseModel):
    data: list[ApiKeyPublic] = Field(
        description="The tenant's keys stored by the server, newest first (keys the operator "
        "configured in STRATA_API_KEYS are not listed)."
    )
