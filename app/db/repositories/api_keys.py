from __future__ import annotations

from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import ApiKey


class ApiKeyRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def add(self, row: ApiKey) -> ApiKey:
        self.db.add(row)
        await self.db.flush()
        return row

    async def tenant_for_hash(self, key_hash: str) -> str | None:
        result = await self.db.exec(select(ApiKey.tenant).where(ApiKey.key_hash == key_hash))
        return result.first()

    async def any_exist(self) -> bool:
        result = await self.db.exec(select(ApiKey.id).limit(1))
        return result.first() is not None
