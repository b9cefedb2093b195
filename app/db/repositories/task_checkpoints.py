"""A session's task checkpoint (`TaskCheckpoint`): read with every task-list rebuild, kept
by the writes whose rebuild replayed a long stretch of the log (`app.services.tasks`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import Integer, Text, bindparam, cast, func, null, select, union_all
from sqlalchemy.sql.elements import ClauseElement
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Item, TaskCheckpoint
from app.db.prepared import DialectInsert, Prepared
from app.db.repositories.items import ItemRecord, parse_stored_json
from app.db.types import utcnow

_T = TaskCheckpoint.__table__  # type: ignore[attr-defined]
_I = Item.__table__  # type: ignore[attr-defined]


@cache
def _with_items(names: tuple[str, ...]) -> Prepared:
    """The checkpoint's row (`kind` NULL) and the task items after it, in one statement:
    a rebuild is one round trip, not two (a REST task write makes one on every request).
    The items part comes first, so the result columns take its types (`created_at`
    reads as a datetime). Tool names are literal parameters (no expanding IN)."""
    checkpoint_seq = select(_T.c.seq).where(_T.c.session_id == bindparam("t_session"))
    items = select(
        _I.c.seq,
        cast(null(), Integer),
        _I.c.kind,
        cast(_I.c.payload, Text),
        _I.c.created_at,
    ).where(
        _I.c.session_id == bindparam("t_session"),
        _I.c.tool_name.in_([bindparam(f"t_name_{n}", value=name) for n, name in enumerate(names)]),
        _I.c.seq > func.coalesce(checkpoint_seq.scalar_subquery(), 0),
    )
    checkpoint = select(
        _T.c.seq,
        _T.c.ops,
        cast(null(), _I.c.kind.type),
        cast(_T.c.state, Text),
        cast(null(), _I.c.created_at.type),
    ).where(_T.c.session_id == bindparam("t_session"))
    return Prepared(union_all(items, checkpoint))


_STATE_COLUMNS = ("seq", "ops", "state", "created_at")


def _keep(insert_into: DialectInsert) -> ClauseElement:
    """The session's checkpoint as a new row, or over its row when that one is older."""
    new = insert_into(_T)
    statement: ClauseElement = new.on_conflict_do_update(
        index_elements=[_T.c.session_id],
        set_={name: new.excluded[name] for name in _STATE_COLUMNS},
        where=_T.c.seq < new.excluded.seq,
    )
    return statement


_KEEP = Prepared(_keep, column_keys=("session_id", *_STATE_COLUMNS))


class CheckpointRow(NamedTuple):
    """The task list as of the log's `seq` (`TaskStore.snapshot`), holding `ops` task items."""

    seq: int
    ops: int
    state: dict[str, Any]


class TaskCheckpointRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def with_items(
        self, session_id: str, names: Sequence[str]
    ) -> tuple[CheckpointRow | None, list[ItemRecord]]:
        """The session's checkpoint and, in log order, its items with these tool names
        after the checkpoint (after none: all of them). A state that is not a JSON object
        reads as an empty one."""
        params = {"t_session": session_id}
        rows = (await _with_items(tuple(names)).execute(self.db, params)).rows
        kept: CheckpointRow | None = None
        items: list[ItemRecord] = []
        for seq, ops, kind, text, created_at in sorted(rows, key=itemgetter(0)):
            if kind is None:
                kept = CheckpointRow(seq, ops, _state_of(text))
            else:
                items.append(ItemRecord(kind, parse_stored_json(text), created_at, seq))
        return kept, items

    async def keep(self, session_id: str, checkpoint: CheckpointRow) -> None:
        """Make `checkpoint` the session's, unless it has a later one: one prepared
        statement (an upsert), so the step of a job that owes a checkpoint stays a
        statement unit (through the ORM that step would be a unit of its own kind, on a
        connection of its own, opened the first time in a process)."""
        values = {"session_id": session_id, **checkpoint._asdict(), "created_at": utcnow()}
        await _KEEP.execute(self.db, values)


def _state_of(text: Any) -> dict[str, Any]:
    try:
        state = parse_stored_json(text) if isinstance(text, str) else text
    except json.JSONDecodeError:
        state = None
    return state if isinstance(state, dict) else {}
