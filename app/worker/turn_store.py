"""The agent loop's ports, backed by the database and the live hub.

Every append is its own unit of work, committed before the loop goes on: what
a client saw happen survives a crash at the next line.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.items import AssistantMessage, ItemPayload, Origin, ToolUseBlock
from app.domain.tasks import TASK_WRITE_TOOLS
from app.domain.usage import Usage
from app.services.events import record_event
from app.services.items import append_item, segment_tail
from app.services.live import LiveHub
from app.services.sessions import get_session
from app.tools.registry import ToolOutput


def writes_tasks(message: AssistantMessage) -> bool:
    return any(
        isinstance(block, ToolUseBlock) and block.name in TASK_WRITE_TOOLS
        for block in message.content
    )


class DbTurnStore:
    """The loop reads the segment before every request; this store keeps what it read
    and asks the database only for the items after it, so a request costs the same
    whatever the segment's or the log's length. The log stays the truth: anything
    appended by someone else (a REST task change, a compaction) is read back, and a
    new segment is read whole."""

    def __init__(self, database: UnitsOfWork, job: Job) -> None:
        self.database = database
        self.job = job
        self._segment_no: int | None = None
        self._last_seq = 0
        self._items: list[ItemPayload] = []

    async def segment(self) -> list[ItemPayload]:
        async with self.database.read() as db:
            session = await get_session(db, self.job.tenant, self.job.session_id)
            if session.current_segment != self._segment_no:
                self._segment_no, self._last_seq, self._items = session.current_segment, 0, []
            tail = await segment_tail(db, session.id, session.current_segment, self._last_seq)
        for seq, payload in tail:
            self._items.append(payload)
            self._last_seq = seq
        return list(self._items)

    async def append(
        self, payload: ItemPayload, origin: Origin, usage: Usage | None = None
    ) -> None:
        job = self.job

        async def work(db: AsyncSession) -> None:
            await append_item(db, job.session_id, payload, origin, turn=job.turn, job_id=job.id)
            sessions = SessionRepository(db)
            if isinstance(payload, AssistantMessage) and origin is Origin.llm:
                await sessions.count_request(
                    job.session_id, wrote_tasks=writes_tasks(payload), usage=usage
                )
            elif usage is not None:
                await sessions.add_usage(job.session_id, usage)
            if usage is not None:
                await JobRepository(db).add_usage(job.id, usage)
                await record_event(db, job.session_id, "usage", usage.model_dump(), job_id=job.id)

        await self.database.write(work)

    async def cancel_requested(self) -> bool:
        async with self.database.read() as db:
            return await JobRepository(db).cancel_requested(self.job.id)


class HubTurnEvents:
    """Text deltas and tool progress, live only."""

    def __init__(self, hub: LiveHub, job: Job) -> None:
        self.hub = hub
        self.job = job

    def _send(self, type_: str, data: dict[str, object]) -> None:
        self.hub.transient(type_, self.job.session_id, self.job.id, {"job_id": self.job.id, **data})

    async def text_delta(self, text: str) -> None:
        self._send("text.delta", {"text": text})

    async def tool_started(self, block: ToolUseBlock) -> None:
        self._send("tool.started", {"tool_use_id": block.id, "name": block.name})

    async def tool_finished(self, block: ToolUseBlock, output: ToolOutput) -> None:
        self._send(
            "tool.finished",
            {"tool_use_id": block.id, "name": block.name, "is_error": output.is_error},
        )
