from __future__ import annotations

from sqlmodel import col, select

from app.db.models import Comment
from app.db.repositories.rows import RowRepository


class CommentRepository(RowRepository):
    async def of_job(self, job_id: str) -> list[Comment]:
        query = select(Comment).where(Comment.job_id == job_id).order_by(col(Comment.id))
        return list((await self.db.exec(query)).all())
