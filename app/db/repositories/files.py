"""The metadata rows of a tenant's uploaded files (`StoredFile`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func
from sqlmodel import col, select

from app.db.models import StoredFile
from app.db.repositories.rows import RowRepository


class FileRepository(RowRepository):
    async def get(self, tenant: str, file_id: str) -> StoredFile | None:
        """The tenant's file; another tenant's is None, as a missing one."""
        row = await self.db.get(StoredFile, file_id)
        if row is None or row.tenant != tenant:
            return None
        return row

    async def of_tenant(self, tenant: str, file_ids: Sequence[str]) -> dict[str, StoredFile]:
        """The tenant's files among `file_ids`, by id (the others are left out)."""
        if not file_ids:
            return {}
        query = select(StoredFile).where(
            StoredFile.tenant == tenant, col(StoredFile.id).in_(list(set(file_ids)))
        )
        return {row.id: row for row in (await self.db.exec(query)).all()}

    async def by_ids(self, file_ids: Sequence[str]) -> dict[str, StoredFile]:
        """The files among `file_ids` whoever owns them: what a request of a session whose
        log names them carries (the ids were checked for its tenant when they entered)."""
        if not file_ids:
            return {}
        query = select(StoredFile).where(col(StoredFile.id).in_(list(set(file_ids))))
        return {row.id: row for row in (await self.db.exec(query)).all()}

    async def list_page(
        self, tenant: str, *, limit: int, before_id: str | None
    ) -> list[StoredFile]:
        """Newest first (ids are time-ordered)."""
        query = select(StoredFile).where(StoredFile.tenant == tenant)
        if before_id is not None:
            query = query.where(col(StoredFile.id) < before_id)
        query = query.order_by(col(StoredFile.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def usage(self, tenant: str) -> tuple[int, int]:
        """The tenant's files: how many, and their bytes (each file's, shared copies too)."""
        query = select(func.count(), func.coalesce(func.sum(StoredFile.size), 0)).where(
            StoredFile.tenant == tenant
        )
        count, size = (await self.db.exec(query)).one()
        return int(count), int(size)

    async def shares_content(self, tenant: str, sha256: str) -> bool:
        """Whether any file of the tenant holds these bytes."""
        query = select(func.count()).where(StoredFile.tenant == tenant, StoredFile.sha256 == sha256)
        return bool((await self.db.exec(query)).one())

    async def remove(self, row: StoredFile) -> None:
        await self.db.delete(row)
        await self.db.flush()
