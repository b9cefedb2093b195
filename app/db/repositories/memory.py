from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryDetail, MemoryTurn, Session
from app.db.types import utcnow


class MemoryRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def turn(self, origin_session_id: str, turn: int) -> MemoryTurn | None:
        query = select(MemoryTurn).where(
            MemoryTurn.origin_session_id == origin_session_id, MemoryTurn.turn == turn
        )
        return (await self.db.exec(query)).first()

    async def add(self, row: MemoryTurn | MemoryDetail) -> None:
        self.db.add(row)
        await self.db.flush()

    async def detail_sources(self, origin_session_id: str, source_ids: Sequence[str]) -> set[str]:
        if not source_ids:
            return set()
        query = select(MemoryDetail.source_id).where(
            MemoryDetail.origin_session_id == origin_session_id,
            col(MemoryDetail.source_id).in_(source_ids),
        )
        return set((await self.db.exec(query)).all())

    async def turns_of(self, session_ids: Sequence[str]) -> list[MemoryTurn]:
        """Every turn owned by these sessions, oldest first."""
        if not session_ids:
            return []
        query = (
            select(MemoryTurn)
            .where(col(MemoryTurn.session_id).in_(session_ids))
            .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
        )
        return list((await self.db.exec(query)).all())

    async def details_of(self, turn_ids: Sequence[int]) -> list[MemoryDetail]:
        if not turn_ids:
            return []
        query = (
            select(MemoryDetail)
            .where(col(MemoryDetail.turn_id).in_(turn_ids))
            .order_by(col(MemoryDetail.id))
        )
        return list((await self.db.exec(query)).all())

    async def set_l1(self, turn_id: int, text: str, *, fallback: bool) -> None:
        await self.db.exec(
            update(MemoryTurn)
            .where(col(MemoryTurn.id) == turn_id)
            .values(l1=text, l1_fallback=fallback, updated_at=utcnow())
        )

    async def move_turns(self, from_session: str, to_session: str) -> int:
        result = await self.db.exec(
            update(MemoryTurn)
            .where(col(MemoryTurn.session_id) == from_session)
            .values(session_id=to_session, updated_at=utcnow())
        )
        return int(result.rowcount or 0)


class ChainRepository:
    """Sessions linked by continuation and merges."""

    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def predecessors(self, session: Session, limit: int = 1000) -> list[Session]:
        """The sessions this one continues, nearest first (cycles are cut)."""
        chain: list[Session] = []
        seen = {session.id}
        current = session.continues_from
        while current and current not in seen and len(chain) < limit:
            row = await self.db.get(Session, current)
            if row is None:
                break
            seen.add(row.id)
            if row.merged_into:  # its turns and its link live in the merge target now
                current = row.merged_into
                continue
            chain.append(row)
            current = row.continues_from
        return chain

    async def merged_into_these(self, session_ids: Sequence[str]) -> list[str]:
        query = select(Session.id).where(col(Session.merged_into).in_(session_ids))
        return list((await self.db.exec(query)).all())

    async def latest_in_project(
        self, tenant: str, source: str, project: str, exclude: str
    ) -> Session | None:
        query = (
            select(Session)
            .where(
                Session.tenant == tenant,
                Session.source == source,
                Session.project == project,
                col(Session.id) != exclude,
                col(Session.merged_into).is_(None),
                col(Session.parent_session_id).is_(None),  # a subagent's thread is no successor
            )
            .order_by(col(Session.id).desc())
            .limit(1)
        )
        return (await self.db.exec(query)).first()

    async def by_external_id(self, tenant: str, source: str, external_id: str) -> Session | None:
        query = select(Session).where(
            Session.tenant == tenant, Session.source == source, Session.external_id == external_id
        )
        return (await self.db.exec(query)).first()
