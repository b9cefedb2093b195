"""What TaskCreate/TaskUpdate/TaskList/TaskGet do for a running job.

Reads answer from the job's task list in memory (`JobSession`). A write applies the
operation to that list and records its result in one transaction that first checks
the log has not moved since the job last looked (a REST change in between): if it
has, the job reads the log again and the write is tried once more, so the result the
model sees is always what replaying the log gives.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.repositories.sessions import SessionRepository
from app.db.types import utcnow
from app.domain.items import Origin, ToolResult
from app.domain.tasks import (
    TaskError,
    TaskOp,
    UnknownTask,
    render_summary,
    render_task,
    render_task_list,
)
from app.engine.tools import ToolError, ToolOutput
from app.engine.truncation import truncate_result
from app.services import webhooks
from app.services.items import append_item
from app.worker.job_session import JobSession

ATTEMPTS = 3  # a write retried after the log moved under it, then given up
READ_ON = "TaskList shows every task and TaskGet one task in full."


def content_of(result: ToolResult) -> str:
    assert isinstance(result.content, str)  # a task tool's result is text
    return result.content


class LogMoved(Exception):
    """Someone else appended to the session since the job last read it."""


class JobTaskGateway:
    def __init__(self, session: JobSession) -> None:
        self.session = session

    async def write(
        self, tool_use_id: str, op: str, args: dict[str, Any], budget_tokens: int | None = None
    ) -> ToolOutput:
        for _ in range(ATTEMPTS):
            if self.session.segment_no is None:
                await self.session.refresh()
            try:
                return await self._write_once(tool_use_id, op, args, budget_tokens)
            except LogMoved:
                self.session.invalidate()
            except BaseException:
                self.session.invalidate()  # the list in memory may hold the failed change
                raise
        raise ToolError("the task list kept changing under this call; try it again")

    async def _write_once(
        self, tool_use_id: str, op: str, args: dict[str, Any], budget_tokens: int | None
    ) -> ToolOutput:
        session = self.session
        job = session.job
        known = session.last_seq

        async def work(db: AsyncSession) -> tuple[int, ToolResult]:
            if await SessionRepository(db).last_seq(job.session_id) != known:
                raise LogMoved
            # the operation and its item carry the same moment, so the task held here (and
            # sent to webhooks) is exactly what replaying the log gives, timestamps included
            now = utcnow()
            try:
                task = session.tasks.apply(TaskOp(op, args, now))
            except (TaskError, ValidationError) as exc:
                content, is_error = str(exc), True
            else:
                verb = "Created" if op == "TaskCreate" else "Updated"
                summary = render_summary(session.tasks)
                content = f"{verb} task {task.taskid}:\n{render_task(task)}\n\n{summary}"
                is_error = False
            if budget_tokens is not None:  # recorded as the model will read it
                content = truncate_result(content, budget_tokens, read_on=READ_ON).text
            result = ToolResult(
                tool_use_id=tool_use_id, content=content, is_error=is_error, name=op, input=args
            )
            row = await append_item(
                db, job.session_id, result, Origin.system, turn=job.turn, job_id=job.id, at=now
            )
            if not is_error:
                await webhooks.task_updated(
                    db, job.tenant, job.session_id, task, op=op, origin="llm", job_id=job.id
                )
            return row.seq, result

        seq, result = await session.database.write(work)
        session.appended(seq, result, tasks_applied=True)
        return ToolOutput(content_of(result), result.is_error, recorded=True)

    async def read(self, taskid: int | None) -> str:
        await self.session.refresh()  # a REST change since the step began is in the answer
        store = self.session.tasks
        if taskid is None:
            return render_task_list(store)
        try:
            return render_task(store.get(taskid))
        except UnknownTask as exc:
            raise ToolError(str(exc)) from exc
