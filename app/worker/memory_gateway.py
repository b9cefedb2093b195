"""The Detail tool's view of memory: the same look-up as GET /sessions/{id}/detail/{time}."""

from __future__ import annotations

from app.db.engine import UnitsOfWork
from app.db.models import Job
from app.domain.errors import InvalidInput, NotFound
from app.engine.tools import ToolError
from app.memory.details import render_details
from app.services.memory import detail
from app.settings import Settings


class LogMemoryGateway:
    def __init__(self, settings: Settings, database: UnitsOfWork, job: Job) -> None:
        self.settings = settings
        self.database = database
        self.job = job

    async def detail(self, reference: str) -> str:
        async with self.database.read() as db:
            try:
                turns = await detail(
                    db, self.job.tenant, self.job.session_id, reference, tz=self.settings.zone
                )
            except (InvalidInput, NotFound) as exc:
                raise ToolError(exc.detail) from exc
        return render_details(turns, tz=self.settings.zone)
