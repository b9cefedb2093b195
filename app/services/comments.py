"""Comments on a job. A user's comment answers a job waiting for a human; a job that has
ended takes none (nothing would ever read it)."""

from __future__ import annotations

from enum import StrEnum

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Comment, Job
from app.db.repositories.actions import ActionRepository
from app.db.repositories.comments import CommentRepository
from app.domain.errors import Conflict
from app.domain.jobs import TERMINAL, JobKind, JobStatus
from app.services.events import record_event
from app.services.jobs import get_job, get_job_locked, set_status


class Author(StrEnum):
    user = "user"
    agent = "agent"
    system = "system"


async def add_comment(
    db: AsyncSession, tenant: str, job_id: str, body: str, author: Author = Author.user
) -> Comment:
    job = await get_job_locked(db, tenant, job_id)  # it cannot end under the comment
    if job.status in TERMINAL:
        raise Conflict(
            f"job {job_id!r} has ended ({job.status}); a comment on it would never be read",
            job_status=job.status,
        )
    return await post_comment(db, job, body, author)


async def post_comment(db: AsyncSession, job: Job, body: str, author: Author) -> Comment:
    comment = await CommentRepository(db).save(
        Comment(job_id=job.id, author=author.value, body=body)
    )
    await record_event(
        db,
        job.session_id,
        "job.comment",
        {"job_id": job.id, "comment_id": comment.id, "author": author.value},
        job_id=job.id,
    )
    # a piece job's ASK waits for a comment; a turn or movement holding tool calls waits
    # for its actions instead
    if (
        author is Author.user
        and job.status == JobStatus.waiting_human
        and job.kind != JobKind.chat
        and not await ActionRepository(db).of_job(job.id, pending_only=True)
    ):
        await set_status(db, job, JobStatus.queued)  # resumes at the movement that asked
    return comment


async def list_comments(db: AsyncSession, tenant: str, job_id: str) -> list[Comment]:
    await get_job(db, tenant, job_id)
    return await comments_of(db, job_id)


async def comments_of(db: AsyncSession, job_id: str) -> list[Comment]:
    return await CommentRepository(db).of_job(job_id)
