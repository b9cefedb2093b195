from __future__ import annotations

from sqlalchemy import bindparam, delete
from sqlalchemy import select as core_select
from sqlmodel import col

from app.db.models import IdempotencyKey
from app.db.prepared import Prepared
from app.db.repositories.rows import RowRepository
from app.db.rows import columns_of, detached

# a keyed write reads its key, and may drop an expired one, in the request's own unit
_K = IdempotencyKey.__table__  # type: ignore[attr-defined]
_THE_KEY = (_K.c.tenant == bindparam("k_tenant")) & (_K.c.key == bindparam("k_key"))
_GET = Prepared(core_select(*_K.c).where(_THE_KEY))
_REMOVE = Prepared(_K.delete().where(_THE_KEY))
_COLUMNS = columns_of(IdempotencyKey)


class IdempotencyRepository(RowRepository):
    async def get(self, tenant: str, key: str) -> IdempotencyKey | None:
        rows = (await _GET.execute(self.db, {"k_tenant": tenant, "k_key": key})).rows
        return detached(IdempotencyKey, _COLUMNS, rows[0]) if rows else None

    async def remove(self, row: IdempotencyKey) -> None:
        await _REMOVE.execute(self.db, {"k_tenant": row.tenant, "k_key": row.key})

    async def purge_expired(self, now: object) -> int:
        result = await self.db.exec(
            delete(IdempotencyKey).where(col(IdempotencyKey.expires_at) < now)
        )
        return int(result.rowcount or 0)
