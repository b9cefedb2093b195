from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, update
from sqlmodel import col, select

from app.db.models import ApiKey
from app.db.repositories.rows import RowRepository


class ApiKeyRepository(RowRepository):
    async def grant_for_hash(self, key_hash: str) -> tuple[str, datetime | None] | None:
        """(tenant, expires_at) of a key that was not revoked, None for any other."""
        query = select(ApiKey.tenant, ApiKey.expires_at).where(
            ApiKey.key_hash == key_hash, col(ApiKey.revoked_at).is_(None)
        )
        row = (await self.db.exec(query)).first()
        return None if row is None else (row[0], row[1])

    async def tenant_has_valid_key(self, tenant: str, now: datetime) -> bool:
        """Whether a key of `tenant` is neither revoked nor expired at `now`."""
        query = (
            select(ApiKey.id)
            .where(ApiKey.tenant == tenant, col(ApiKey.revoked_at).is_(None))
            .where(or_(col(ApiKey.expires_at).is_(None), col(ApiKey.expires_at) > now))
            .limit(1)
        )
        return (await self.db.exec(query)).first() is not None

    async def any_exist(self) -> bool:
        result = await self.db.exec(select(ApiKey.id).limit(1))
        return result.first() is not None

    async def list_all(self) -> list[ApiKey]:
        query = select(ApiKey).order_by(col(ApiKey.tenant), col(ApiKey.created_at))
        return list((await self.db.exec(query)).all())

    async def list_for_tenant(self, tenant: str) -> list[ApiKey]:
        """The tenant's stored keys, newest first (ids are time-ordered)."""
        query = select(ApiKey).where(ApiKey.tenant == tenant).order_by(col(ApiKey.id).desc())
        return list((await self.db.exec(query)).all())

    async def revoke(self, key_id: str, at: datetime) -> ApiKey | None:
        """Marks the key revoked (once: the first time stays); None when there is no such key."""
        await self.db.exec(
            update(ApiKey)
            .where(col(ApiKey.id) == key_id, col(ApiKey.revoked_at).is_(None))
            .values(revoked_at=at)
        )
        result = await self.db.exec(
            select(ApiKey).where(ApiKey.id == key_id).execution_options(populate_existing=True)
        )
        return result.first()
