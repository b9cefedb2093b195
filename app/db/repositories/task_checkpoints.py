"""A session's task checkpoint (`TaskCheckpoint`): read with every task-list rebuild, kept
by the writes whose rebuild replayed a long stretch of the log (`app.services.tasks`)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from sqlalchemy import Text, bindparam, cast, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import TaskCheckpoint
from app.db.prepared import Prepared
from app.db.repositories.items import parse_stored_json
from app.db.types import utcnow

_T = TaskCheckpoint.__table__  # type: ignore[attr-defined]
_GET = Prepared(
    select(_T.c.seq, _T.c.ops, cast(_T.c.state, Text)).where(
        _T.c.session_id == bindparam("t_session")
    )
)


class CheckpointRow(NamedTuple):
    """The task list as of the log's `seq` (`TaskStore.snapshot`), holding `ops` task items."""

    seq: int
    ops: int
    state: dict[str, Any]


class TaskCheckpointRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def get(self, session_id: str) -> CheckpointRow | None:
        """The session's checkpoint, one prepared primary-key read (every rebuild makes
        it); a state that is not a JSON object reads as an empty one."""
        rows = (await _GET.execute(self.db, {"t_session": session_id})).rows
        if not rows:
            return None
        seq, ops, text = rows[0]
        try:
            state = parse_stored_json(text) if isinstance(text, str) else text
        except json.JSONDecodeError:
            state = None
        return CheckpointRow(seq, ops, state if isinstance(state, dict) else {})

    async def keep(self, session_id: str, checkpoint: CheckpointRow) -> None:
        """Make `checkpoint` the session's, unless it has a later one. The caller's
        transaction holds the session's row, so two writers never insert it at once."""
        current = await self.db.get(TaskCheckpoint, session_id)
        if current is not None and current.seq >= checkpoint.seq:
            return
        row = current or TaskCheckpoint(session_id=session_id, seq=0, ops=0, state={})
        row.seq, row.ops, row.state = checkpoint
        row.created_at = utcnow()
        self.db.add(row)
        await self.db.flush()
