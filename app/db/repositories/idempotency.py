from __future__ import annotations

from sqlalchemy import delete
from sqlmodel import col, select

from app.db.models import IdempotencyKey
from app.db.repositories.rows import RowRepository


class IdempotencyRepository(RowRepository):
    async def get(self, tenant: str, key: str) -> IdempotencyKey | None:
        query = select(IdempotencyKey).where(
            IdempotencyKey.tenant == tenant, IdempotencyKey.key == key
        )
        return (await self.db.exec(query)).first()

    async def remove(self, row: IdempotencyKey) -> None:
        await self.db.delete(row)
        await self.db.flush()

    async def purge_expired(self, now: object) -> int:
        result = await self.db.exec(
            delete(IdempotencyKey).where(col(IdempotencyKey.expires_at) < now)
        )
        return int(result.rowcount or 0)
