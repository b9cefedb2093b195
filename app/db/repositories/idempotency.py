from __future__ import annotations

from sqlalchemy import delete
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import IdempotencyKey


class IdempotencyRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def get(self, tenant: str, key: str) -> IdempotencyKey | None:
        query = select(IdempotencyKey).where(
            IdempotencyKey.tenant == tenant, IdempotencyKey.key == key
        )
        return (await self.db.exec(query)).first()

    async def add(self, row: IdempotencyKey) -> None:
        self.db.add(row)
        await self.db.flush()

    async def remove(self, row: IdempotencyKey) -> None:
        await self.db.delete(row)
        await self.db.flush()

    async def purge_expired(self, now: object) -> int:
        result = await self.db.exec(
            delete(IdempotencyKey).where(col(IdempotencyKey.expires_at) < now)
        )
        return int(result.rowcount or 0)
