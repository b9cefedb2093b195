from __future__ import annotations

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Comment


class CommentRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def add(self, row: Comment) -> Comment:
        self.db.add(row)
        await self.db.flush()
        return row

    async def of_job(self, job_id: str) -> list[Comment]:
        query = select(Comment).where(Comment.job_id == job_id).order_by(col(Comment.id))
        return list((await self.db.exec(query)).all())
