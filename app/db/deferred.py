"""Inserts a unit of work makes at its end, the rows of one table in one statement.

Durable events are written by nearly every change, often several per unit of work (a
tool batch appends one `item.appended` per result, a REST task write two events). Each
INSERT on its own is a round trip on PostgreSQL (~0.2 ms of the server's CPU through
psycopg and the event loop), and a DBAPI `executemany` runs in psycopg's pipeline mode,
whose set-up and sync cost about twice a plain statement (profiled). Nothing reads an
event in the unit that wrote it, so the rows wait on the unit's session and go in one
multi-row INSERT per table (in chunks of `_CHUNK` rows) when the unit ends: `Database`
calls `flush` after the unit's work returns, inside its transaction or savepoint, so
they commit and roll back with the unit like any other statement of it. A read of the
same rows in that unit (`EventRepository`) flushes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from sqlalchemy import Table, bindparam, insert
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.prepared import Prepared

_KEY = "strata.deferred"
_CHUNK = 50  # rows per statement at most: a prepared statement per row count up to it

Pending = dict[tuple[Table, tuple[str, ...]], list[Mapping[str, Any]]]


def defer(db: AsyncSession, table: Table, row: Mapping[str, Any]) -> None:
    """Insert `row` (column key → value) into `table` when the unit of work `db` ends."""
    pending: Pending = db.info.setdefault(_KEY, {})
    pending.setdefault((table, tuple(row)), []).append(row)


async def flush(db: AsyncSession) -> None:
    """Insert what `db` deferred, each table's rows in the order they were deferred."""
    pending: Pending | None = db.info.pop(_KEY, None)
    for (table, keys), rows in (pending or {}).items():
        for start in range(0, len(rows), _CHUNK):
            chunk = rows[start : start + _CHUNK]
            params = {f"{key}_{n}": row[key] for n, row in enumerate(chunk) for key in keys}
            await _insert(table, keys, len(chunk)).execute(db, params)


@cache
def _insert(table: Table, keys: tuple[str, ...], count: int) -> Prepared:
    rows = [
        {key: bindparam(f"{key}_{n}", type_=table.c[key].type) for key in keys}
        for n in range(count)
    ]
    return Prepared(insert(table).values(rows))
