"""The one writer of ORM rows, and their reader by primary key.

A repository's statements on the hot path are prepared (`app.db.prepared`); the rest of
its rows (a session made or renamed, a webhook subscription, a comment, a job changed)
go through the ORM here, so that no module outside `app.db` touches a session. A new row
a request makes on the hot path (a chat message's job, an idempotency key) is inserted
by one prepared statement of its table (`insert`).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Table, insert
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.prepared import Prepared
from app.db.rows import columns_of

M = TypeVar("M", bound=SQLModel)


class _Insert(NamedTuple):
    statement: Prepared
    # (column key, model attribute) of each column the statement sets
    columns: tuple[tuple[str, str], ...]
    # the attribute of the key the database generates (autoincrement), if any
    generated: str | None


@functools.cache
def _insert_of(model: type[SQLModel]) -> _Insert:
    """The prepared INSERT of `model`'s table: every column but a generated key, which
    it returns."""
    table: Table = model.__table__  # type: ignore[attr-defined]
    generated = table.autoincrement_column
    columns = tuple(
        (column.key, attribute)
        for column, attribute in zip(table.c, columns_of(model), strict=True)
        if column is not generated
    )
    statement: Any = insert(table)
    generated_attribute = None
    if generated is not None:
        statement = statement.returning(generated)
        generated_attribute = columns_of(model)[list(table.c).index(generated)]
    prepared = Prepared(statement, column_keys=[key for key, _ in columns])
    return _Insert(prepared, columns, generated_attribute)


class RowRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def save(self, row: M) -> M:
        """Insert the new `row`, or write what changed on a loaded or detached one, in this
        unit of work (flushed now: its defaults and keys are there when this returns)."""
        self.db.add(row)
        await self.db.flush()
        return row

    async def insert(self, row: M) -> M:
        """Insert the new `row` by one prepared statement, in this unit of work: its values
        are the model's (its defaults were set when it was made), a key the database
        generates is read back. The row is then as a read one: detached and clean."""
        statement, columns, generated = _insert_of(type(row))
        params = {key: getattr(row, attribute) for key, attribute in columns}
        outcome = await statement.execute(self.db, params)
        if generated is not None:
            setattr(row, generated, outcome.rows[0][0])
        make_transient_to_detached(row)
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
