"""A tenant's MCP servers (`McpServerRow`)."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import col, select

from app.db.models import McpServerRow
from app.db.repositories.rows import RowRepository


class McpServerRepository(RowRepository):
    async def get(self, tenant: str, name: str) -> McpServerRow | None:
        return await self.db.get(McpServerRow, (tenant, name))

    async def named(self, tenant: str, names: list[str]) -> list[McpServerRow]:
        if not names:
            return []
        query = select(McpServerRow).where(
            McpServerRow.tenant == tenant, col(McpServerRow.name).in_(names)
        )
        return list((await self.db.exec(query)).all())

    async def list_page(self, tenant: str, *, limit: int, after: str | None) -> list[McpServerRow]:
        """By name."""
        query = select(McpServerRow).where(McpServerRow.tenant == tenant)
        if after is not None:
            query = query.where(col(McpServerRow.name) > after)
        query = query.order_by(col(McpServerRow.name)).limit(limit)
        return list((await self.db.exec(query)).all())

    async def count(self, tenant: str) -> int:
        query = select(func.count()).select_from(McpServerRow).where(McpServerRow.tenant == tenant)
        return int((await self.db.exec(query)).one())

    async def remove(self, row: McpServerRow) -> None:
        await self.db.delete(row)
        await self.db.flush()
