"""Which write units a piece of code runs, by the name of each unit's work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database


def count_write_units(database: Database) -> list[str]:
    """Record the work of every write unit `database` runs from now on (the innermost
    name of the work's function), in order, in the list returned."""
    names: list[str] = []
    write, write_statements = database.write, database.write_statements

    def counted(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def unit(work: Callable[[AsyncSession], Awaitable[Any]]) -> Any:
            names.append(getattr(work, "__qualname__", repr(work)).rsplit(".", 1)[-1])
            return await inner(work)

        return unit

    database.write = counted(write)  # type: ignore[method-assign,assignment]
    database.write_statements = counted(write_statements)  # type: ignore[method-assign,assignment]
    return names


def add_rows(*rows: Any) -> Callable[[AsyncSession], Awaitable[None]]:
    """A write unit that inserts `rows` in order, each flushed before the next (an event's
    row after its session's)."""

    async def work(db: AsyncSession) -> None:
        for row in rows:
            db.add(row)
            await db.flush()

    return work
