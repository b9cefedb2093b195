"""The one writer of ORM rows, and their reader by primary key.

A repository's statements on the hot path are prepared (`app.db.prepared`); the rest of
its rows (a session made or renamed, a webhook subscription, a comment, a job queued or
changed) go through the ORM here, so that no module outside `app.db` touches a session.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

M = TypeVar("M", bound=SQLModel)


class RowRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def save(self, row: M) -> M:
        """Insert the new `row`, or write what changed on a loaded or detached one, in this
        unit of work (flushed now: its defaults and keys are there when this returns)."""
        self.db.add(row)
        await self.db.flush()
        return row

    async def save_all(self, *rows: SQLModel) -> None:
        self.db.add_all(rows)
        await self.db.flush()

    async def by_id(self, model: type[M], key: Any, *, locked: bool = False) -> M | None:
        """The row of `model` with primary key `key`, or None. `locked`: read again and
        locked until the unit ends (`FOR UPDATE` on PostgreSQL; SQLite's writer is alone)."""
        if locked:
            return await self.db.get(model, key, with_for_update=True, populate_existing=True)
        return await self.db.get(model, key)
