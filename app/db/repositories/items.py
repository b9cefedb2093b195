from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Item


class ItemRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def add(self, row: Item) -> Item:
        self.db.add(row)
        await self.db.flush()
        return row

    async def list_page(self, session_id: str, *, after_seq: int, limit: int) -> list[Item]:
        query = (
            select(Item)
            .where(Item.session_id == session_id, col(Item.seq) > after_seq)
            .order_by(col(Item.seq))
            .limit(limit)
        )
        return list((await self.db.exec(query)).all())

    async def segment(self, session_id: str, segment: int) -> list[Item]:
        query = (
            select(Item)
            .where(Item.session_id == session_id, Item.segment == segment)
            .order_by(col(Item.seq))
        )
        return list((await self.db.exec(query)).all())

    async def get(self, session_id: str, seq: int) -> Item | None:
        query = select(Item).where(Item.session_id == session_id, Item.seq == seq)
        return (await self.db.exec(query)).first()

    async def by_tool_names(self, session_id: str, names: Sequence[str]) -> list[Item]:
        query = (
            select(Item)
            .where(Item.session_id == session_id, col(Item.tool_name).in_(names))
            .order_by(col(Item.seq))
        )
        return list((await self.db.exec(query)).all())

    async def of_turns(self, session_id: str, turns: Sequence[int]) -> list[Item]:
        query = (
            select(Item)
            .where(Item.session_id == session_id, col(Item.turn).in_(turns))
            .order_by(col(Item.seq))
        )
        return list((await self.db.exec(query)).all())

    async def known_source_ids(self, session_id: str, source_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(source_ids), 500):
            chunk = source_ids[start : start + 500]
            query = select(Item.source_id).where(
                Item.session_id == session_id, col(Item.source_id).in_(chunk)
            )
            found.update(s for s in (await self.db.exec(query)).all() if s is not None)
        return found
