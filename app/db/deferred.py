"""Inserts a unit of work makes at its end, all rows of one statement at once.

Durable events are written by nearly every change, often several per unit of work (a
tool batch appends one `item.appended` per result, a REST task write two events). Each
INSERT on its own is a round trip on PostgreSQL (~0.25 ms of the server's CPU through
psycopg and the event loop). Nothing reads an event in the unit that wrote it, so the
rows wait on the unit's session and go in one `executemany` per statement when the unit
ends (`Database` calls `flush` after the unit's work returns, inside its transaction or
savepoint): they commit and roll back with the unit like any other statement of it. A
read of the same rows in that unit (`EventRepository`) flushes them first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.prepared import Prepared

_KEY = "strata.deferred"


def defer(db: AsyncSession, statement: Prepared, row: Mapping[str, Any]) -> None:
    """Insert `row` with `statement` when the unit of work `db` ends."""
    pending: dict[Prepared, list[Mapping[str, Any]]] = db.info.setdefault(_KEY, {})
    pending.setdefault(statement, []).append(row)


async def flush(db: AsyncSession) -> None:
    """Run what `db` deferred, in the order it was deferred within each statement."""
    pending: dict[Prepared, list[Mapping[str, Any]]] | None = db.info.pop(_KEY, None)
    for statement, rows in (pending or {}).items():
        await statement.execute_many(db, rows)
