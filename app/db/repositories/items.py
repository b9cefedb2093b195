from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Text, bindparam, cast, func, insert
from sqlalchemy import select as core_select
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Item
from app.db.models.item import AppendedItem
from app.db.prepared import Prepared


class ItemRecord(NamedTuple):
    """What replay needs of an item: its kind, its payload as stored, when it was made,
    and where it is in the log."""

    kind: str
    payload: dict[str, Any]
    created_at: datetime
    seq: int


def parse_stored_json(text: str) -> Any:
    """orjson, which is several times faster than the stdlib; it refuses what strict JSON
    does not allow (NaN, Infinity), which the stdlib encoder may have written: then json."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class ItemRow(NamedTuple):
    """An item as a running job and the memory projection read it: plain values, the
    payload parsed with orjson (no ORM object, no stdlib JSON decode per row)."""

    seq: int
    turn: int
    kind: str
    payload: dict[str, Any]
    source_id: str | None
    created_at: datetime


def _rows() -> Any:
    # SQLAlchemy's select: SQLModel's is typed for at most four columns
    return core_select(
        col(Item.seq),
        col(Item.turn),
        col(Item.kind),
        cast(Item.payload, Text),
        col(Item.source_id),
        col(Item.created_at),
    )


async def _item_rows(db: AsyncSession, query: Any) -> list[ItemRow]:
    return _as_item_rows((await db.exec(query)).all())


def _as_item_rows(rows: Sequence[Any]) -> list[ItemRow]:
    return [
        ItemRow(seq, turn, kind, parse_stored_json(payload), source_id, created_at)
        for seq, turn, kind, payload, source_id, created_at in rows
    ]


_SEGMENT = Prepared(
    _rows()
    .where(
        Item.session_id == bindparam("i_session"),
        Item.segment == bindparam("i_segment"),
        col(Item.seq) > bindparam("i_after"),
    )
    .order_by(col(Item.seq))
)
_PART = Prepared(
    _rows()
    .where(
        Item.session_id == bindparam("i_session"),
        Item.segment == bindparam("i_segment"),
        col(Item.seq) > bindparam("i_after"),
        col(Item.seq) <= bindparam("i_upto"),
    )
    .order_by(col(Item.seq))
)
_OF_TURN = Prepared(
    _rows()
    .where(Item.session_id == bindparam("i_session"), Item.turn == bindparam("i_turn"))
    .order_by(col(Item.seq))
)


_COLUMNS = tuple(c.name for c in Item.__table__.columns if c.name != "id")  # type: ignore[attr-defined]
_INSERT = insert(Item.__table__)  # type: ignore[attr-defined]
_APPEND = Prepared(_INSERT, column_keys=_COLUMNS)


_I = Item.__table__  # type: ignore[attr-defined]
# an `AppendedItem`'s columns in its order, the payload as text (parsed with orjson)
_SEQ_RANGE = Prepared(
    core_select(
        *(
            cast(_I.c[name], Text) if name == "payload" else _I.c[name]
            for name in AppendedItem._fields
        )
    ).where(
        _I.c.session_id == bindparam("i_session"),
        _I.c.seq >= bindparam("i_from"),
        _I.c.seq <= bindparam("i_upto"),
    )
)


@cache
def _by_tool_names(names: tuple[str, ...]) -> Prepared:
    """The items of a session with one of `names` after a seq; the names are fixed in
    the statement (literal parameters), so it needs no expanding IN."""
    return Prepared(
        core_select(_I.c.seq, _I.c.kind, cast(_I.c.payload, Text), _I.c.created_at).where(
            _I.c.session_id == bindparam("i_session"),
            _I.c.tool_name.in_(
                [bindparam(f"i_name_{n}", value=name) for n, name in enumerate(names)]
            ),
            _I.c.seq > bindparam("i_after"),
        )
    )


class ItemRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def add(self, row: AppendedItem) -> AppendedItem:
        """Insert `row` with one prepared statement (no ORM object, no unit-of-work
        flush: appends are the hottest write there is)."""
        await _APPEND.execute(self.db, row._asdict())
        return row

    async def list_page(self, session_id: str, *, after_seq: int, limit: int) -> list[Item]:
        query = (
            select(Item)
            .where(Item.session_id == session_id, col(Item.seq) > after_seq)
            .order_by(col(Item.seq))
            .limit(limit)
        )
        return list((await self.db.exec(query)).all())

    async def segment(self, session_id: str, segment: int, *, after_seq: int = 0) -> list[ItemRow]:
        """The segment's items after `after_seq`: what a job reads at its start, and again
        when the log changed under it (one prepared statement)."""
        params = {"i_session": session_id, "i_segment": segment, "i_after": after_seq}
        return _as_item_rows((await _SEGMENT.execute(self.db, params)).rows)

    async def with_seqs(self, session_id: str, seqs: Sequence[int]) -> list[AppendedItem]:
        """The session's items of these seqs (at most a stream's batch of them), as plain
        records: one prepared statement reading the range they span (a stream's batch
        names the items appended one after another), filtered to them."""
        if not seqs:
            return []
        wanted = set(seqs)
        params = {"i_session": session_id, "i_from": min(wanted), "i_upto": max(wanted)}
        found = []
        for row in (await _SEQ_RANGE.execute(self.db, params)).rows:
            session, seq, turn, segment, kind, origin, tool, source, payload, created = row
            if seq in wanted:
                payload = parse_stored_json(payload)
                found.append(
                    AppendedItem(
                        session, seq, turn, segment, kind, origin, tool, source, payload, created
                    )
                )
        return found

    async def by_tool_names(
        self, session_id: str, names: Sequence[str], *, after_seq: int = 0
    ) -> list[ItemRecord]:
        """The items with these tool names, in log order, as plain records.

        Task replay reads every task item of a session on each request, so this skips what
        costs most per row: ORM objects (identity map, instance state) and the JSON type's
        stdlib decode. The payload is fetched as text (a no-op on SQLite, `jsonb` → text on
        PostgreSQL) and parsed with orjson. The statement is prepared (one per set of
        names; replay always asks the same one).

        There is no ORDER BY: to avoid a sort, SQLite would walk the `(session_id, seq)`
        index and read every item of the session to test its tool name. Without it the
        rows come from `ix_items_session_tool`, in `seq` order per name, and the sort below
        only merges those runs.
        """
        statement = _by_tool_names(tuple(names))
        params = {"i_session": session_id, "i_after": after_seq}
        rows = sorted((await statement.execute(self.db, params)).rows, key=itemgetter(0))
        return [
            ItemRecord(kind, parse_stored_json(payload), created_at, seq)
            for seq, kind, payload, created_at in rows
        ]

    async def of_turns(self, session_id: str, turns: Sequence[int]) -> list[ItemRow]:
        if len(turns) == 1:  # the turn that just ended: one prepared statement
            params = {"i_session": session_id, "i_turn": turns[0]}
            return _as_item_rows((await _OF_TURN.execute(self.db, params)).rows)
        query = (
            _rows()
            .where(Item.session_id == session_id, col(Item.turn).in_(turns))
            .order_by(col(Item.seq))
        )
        return await _item_rows(self.db, query)

    async def part(self, source: str, segment: int, after_seq: int, upto: int) -> list[ItemRow]:
        """The items of `source`'s `segment` with `after_seq < seq <= upto`: one inherited
        part of a forked or rewound session's segment (`app.domain.lineage.Part`); one
        prepared statement (a job reads it in its snapshot of prepared statements)."""
        params = {"i_session": source, "i_segment": segment, "i_after": after_seq, "i_upto": upto}
        return _as_item_rows((await _PART.execute(self.db, params)).rows)

    async def span_page(
        self, source: str, *, after_seq: int, upto: int | None, limit: int
    ) -> list[Item]:
        """`list_page` of the items of `source` up to `upto` (None: no end)."""
        query = select(Item).where(Item.session_id == source, col(Item.seq) > after_seq)
        if upto is not None:
            query = query.where(col(Item.seq) <= upto)
        return list((await self.db.exec(query.order_by(col(Item.seq)).limit(limit))).all())

    async def of_kinds_between(
        self, session_id: str, kinds: Sequence[str], *, after_seq: int, upto: int, limit: int
    ) -> list[Item]:
        """The session's own items of these kinds with `after_seq < seq <= upto`."""
        query = select(Item).where(
            Item.session_id == session_id,
            col(Item.kind).in_(kinds),
            col(Item.seq) > after_seq,
            col(Item.seq) <= upto,
        )
        return list((await self.db.exec(query.order_by(col(Item.seq)).limit(limit))).all())

    async def at_seq(self, session_id: str, seq: int) -> Item | None:
        query = select(Item).where(Item.session_id == session_id, Item.seq == seq)
        return (await self.db.exec(query)).first()

    async def turn_bounds(
        self, session_id: str, turn: int, *, after_seq: int = 0, upto: int | None = None
    ) -> tuple[int, int] | None:
        """The first and last `seq` of the session's items of `turn` in a range."""
        query: Any = core_select(func.min(_I.c.seq), func.max(_I.c.seq)).where(
            _I.c.session_id == session_id, _I.c.turn == turn, _I.c.seq > after_seq
        )
        if upto is not None:
            query = query.where(_I.c.seq <= upto)
        first, last = (await self.db.exec(query)).one()
        return None if first is None else (int(first), int(last))

    async def turns_starting_in(
        self, session_id: str, after_seq: int, upto: int | None
    ) -> tuple[int, int | None] | None:
        """The numbers of the session's turns whose first item has `after_seq < seq <= upto`
        (`upto` None: no end, and then turns still to come count too), as the lowest and
        highest (None: no end); None when no turn starts there. A session's turns follow
        each other in `seq`, so three index probes answer it however long the range."""

        def turn_at(order: Any, *where: Any) -> Any:
            query = core_select(_I.c.turn).where(_I.c.session_id == session_id, *where)
            return query.order_by(order).limit(1)

        within = [_I.c.seq > after_seq]
        if upto is not None:
            within.append(_I.c.seq <= upto)
        first = (await self.db.exec(turn_at(_I.c.seq, *within))).first()
        before = (await self.db.exec(turn_at(_I.c.seq.desc(), _I.c.seq <= after_seq))).first()
        ongoing = None if before is None else int(before[0])  # a turn begun before the range
        if first is None:
            low = 0 if ongoing is None else ongoing + 1
            return None if upto is not None else (low, None)
        low = int(first[0]) + (1 if int(first[0]) == ongoing else 0)
        if upto is None:
            return low, None
        last = (await self.db.exec(turn_at(_I.c.seq.desc(), *within))).first()
        high = int(last[0]) if last is not None else low - 1
        return (low, high) if low <= high else None

    async def known_source_ids(self, session_id: str, source_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(source_ids), 500):
            chunk = source_ids[start : start + 500]
            query = select(Item.source_id).where(
                Item.session_id == session_id, col(Item.source_id).in_(chunk)
            )
            found.update(s for s in (await self.db.exec(query)).all() if s is not None)
        return found
