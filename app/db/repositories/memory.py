from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ARRAY,
    DateTime,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    cast,
    false,
    func,
    literal,
    or_,
    union_all,
    update,
)
from sqlalchemy import select as sa_select
from sqlalchemy.exc import NoResultFound
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import ClauseElement
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from app.db import deferred
from app.db.models import MemoryDetail, MemoryTurn, Session
from app.db.prepared import DialectInsert, Prepared
from app.db.repositories.rows import RowRepository
from app.db.types import UTCDateTime, utcnow
from app.memory.timeref import second_of_day


class TurnText(NamedTuple):
    """What the memory block shows of a turn."""

    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None


class TurnBody(NamedTuple):
    """A turn's L2 as its projection gives it."""

    user_text: str
    assistant_text: str
    ended_at: datetime
    started_at: datetime | None = None


class NewestText(NamedTuple):
    """A turn as the budgeted memory block reads it: texts cut to what it could show."""

    ended_at: datetime
    id: int
    user_text: str
    assistant_text: str
    l1: str | None


class ChainSpan(NamedTuple):
    """A session's turns: the end of its first and last one it owns (None when it owns
    none), and how many happened in it (counted by turn number)."""

    first: datetime | None
    last: datetime | None
    turns: int


class FoundTurn(NamedTuple):
    """What a detail look-up shows of a turn: plain rows, not ORM objects (a time of day
    over a long chain matches hundreds of turns)."""

    id: int
    origin_session_id: str
    turn: int
    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None


_FOUND = (
    col(MemoryTurn.id),
    col(MemoryTurn.origin_session_id),
    col(MemoryTurn.turn),
    col(MemoryTurn.ended_at),
    col(MemoryTurn.user_text),
    col(MemoryTurn.assistant_text),
    col(MemoryTurn.l1),
)
# a found turn and when it began (None: projected before turns kept it)
_SPANNED = (*_FOUND, col(MemoryTurn.started_at))
Spanned = tuple[FoundTurn, datetime | None]


def _spanned(row: Any) -> Spanned:
    *found, started_at = row
    return FoundTurn(*found), started_at


class Holder(NamedTuple):
    """Where some of a session's memory turns are: every turn `session_id` owns (`turns`
    None: a session that reads its own log whole), or the turns of `session_id`'s log
    numbered from `turns[0]` up to `turns[1]` (None: no end), one range of a forked or
    rewound session's lineage (`app.services.memory.memory_of`). A range is read by the
    turn's origin, never its owner: the turns a fork shares are its parent's rows."""

    session_id: str
    turns: tuple[int, int | None] | None = None

    def holds(self) -> Any:
        """The condition on `MemoryTurn` of the turns it holds."""
        if self.turns is None:
            return col(MemoryTurn.session_id) == self.session_id
        low, high = self.turns
        held = [col(MemoryTurn.origin_session_id) == self.session_id, col(MemoryTurn.turn) >= low]
        if high is not None:
            held.append(col(MemoryTurn.turn) <= high)
        return and_(*held)

    def covers(self, origin: str, turn: int) -> bool:
        """Whether turn `turn` of `origin` is one of its range's (never for an owner's
        whole memory: nothing of it is reverted)."""
        if self.turns is None or origin != self.session_id:
            return False
        low, high = self.turns
        return low <= turn and (high is None or turn <= high)


def held_by(holders: Sequence[Holder]) -> Any:
    """The condition on `MemoryTurn` of the turns any of `holders` holds: one `IN` for the
    owners (one range of the session index each), a range of the `(origin_session_id,
    turn)` index per lineage range."""
    owners = [h.session_id for h in holders if h.turns is None]
    parts = [h.holds() for h in holders if h.turns is not None]
    if owners:
        parts.insert(0, col(MemoryTurn.session_id).in_(owners))
    if not parts:
        return false()
    return parts[0] if len(parts) == 1 else or_(*parts)


def _older_than(ended_at: Any, turn_id: Any) -> Any:
    """A turn before the keyset `(ended_at, turn_id)` in the order newest first."""
    return or_(
        col(MemoryTurn.ended_at) < ended_at,
        and_(col(MemoryTurn.ended_at) == ended_at, col(MemoryTurn.id) < turn_id),
    )


def _texts_of(chars: str, ranged: bool) -> Any:
    """A session's turns (`ranged`: those of its log numbered `turn_low..turn_high`), their
    texts cut to the parameter `chars` characters."""
    cut = [
        func.substr(column, 1, bindparam(chars))
        for column in (MemoryTurn.user_text, MemoryTurn.assistant_text, MemoryTurn.l1)
    ]
    query = sa_select(col(MemoryTurn.ended_at), col(MemoryTurn.id), *cut)
    if not ranged:
        return query.where(col(MemoryTurn.session_id) == bindparam("session_id"))
    return query.where(
        col(MemoryTurn.origin_session_id) == bindparam("session_id"),
        col(MemoryTurn.turn) >= bindparam("turn_low"),
        col(MemoryTurn.turn) <= bindparam("turn_high"),
    )


@functools.cache
def _newest_query(after_keyset: bool, wide: bool, ranged: bool = False) -> Any:
    """`MemoryRepository.newest_texts`' statement, built once per shape: the turns that may
    be shown whole (`wide_rows` of them, cut to `wide_chars`) then the summaries after them
    (`narrow_limit`, cut to `narrow_chars`), as two ranges of the same index.

    Building this statement (and its cache key) on every call cost several times what
    SQLite spends running it; a window function deciding each row's cut cost twice the
    two ranges."""
    newest = (col(MemoryTurn.ended_at).desc(), col(MemoryTurn.id).desc())

    def part(chars: str) -> Any:
        query = _texts_of(chars, ranged)
        if after_keyset:
            at = bindparam("before_at", type_=UTCDateTime)
            query = query.where(_older_than(at, bindparam("before_id")))
        return query.order_by(*newest)

    narrow = part("narrow_chars").limit(bindparam("narrow_limit"))
    if not wide:
        return narrow
    narrow = narrow.offset(bindparam("wide_rows"))
    both = union_all(
        part("wide_chars").limit(bindparam("wide_rows")).subquery().select(),
        narrow.subquery().select(),
    ).subquery()
    return sa_select(*both.c).order_by(both.c.ended_at.desc(), both.c.id.desc())


@functools.cache
def _spans_query() -> Any:
    """`MemoryRepository.chain_spans`' statement: the chain's sessions (an expanding
    `chain` list) and those merged into them, each with four index probes."""
    merged = aliased(Session)
    owners: Any = sa_select(col(Session.id).label("id")).where(
        col(Session.id).in_(bindparam("chain", expanding=True))
    )
    owners_cte = owners.cte("owners", recursive=True)
    owners_cte = owners_cte.union(
        sa_select(col(merged.id)).join(owners_cte, col(merged.merged_into) == owners_cte.c.id)
    )
    owner = owners_cte.c.id
    owned = MemoryTurn.session_id == owner
    origin = MemoryTurn.origin_session_id == owner
    return sa_select(
        owner,
        select(func.min(MemoryTurn.ended_at)).where(owned).scalar_subquery(),
        select(func.max(MemoryTurn.ended_at)).where(owned).scalar_subquery(),
        select(func.min(MemoryTurn.turn)).where(origin).scalar_subquery(),
        select(func.max(MemoryTurn.turn)).where(origin).scalar_subquery(),
    )


def _began_by(first: Any, moment: datetime) -> Any:
    """The row of the subquery `first` (a probe's first turn ending after `moment`) if
    that turn began by `moment`: only then does it run across it."""
    return sa_select(first).where(first.c.started_at <= moment)


def _sqlite_moment(moment: datetime) -> str:
    """A moment as SQLite stores a `UTCDateTime` (text that sorts as the time does)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


@functools.cache
def _probes_query(postgresql: bool) -> Any:
    """`MemoryRepository.first_ending_after`'s statement: per probe (a session and a
    moment), a correlated probe of the `(session_id, ended_at)` index for the session's
    first turn that ended after the moment."""
    probes: Any
    if postgresql:
        probes = (
            func.unnest(
                bindparam("sessions", type_=ARRAY(String())),
                bindparam("moments", type_=ARRAY(DateTime(timezone=True))),
            )
            .table_valued("session_id", "moment")
            .render_derived(name="probes")
        )
        session_id, moment = probes.c.session_id, probes.c.moment
    else:
        probes = func.json_each(bindparam("probes")).table_valued("value").alias("probes")
        session_id = func.json_extract(probes.c.value, "$[0]")
        moment = func.json_extract(probes.c.value, "$[1]")
    turn = aliased(MemoryTurn)
    first = (
        sa_select(col(turn.id))
        .where(col(turn.session_id) == session_id, col(turn.ended_at) > moment)
        .order_by(col(turn.ended_at), col(turn.id))
        .limit(1)
        .correlate(probes)
        .scalar_subquery()
    )
    # only a turn that began by the moment runs across it: the others are left in the database
    return (
        sa_select(*_SPANNED)
        .select_from(probes)
        .join(MemoryTurn, col(MemoryTurn.id) == first)
        .where(col(MemoryTurn.started_at) <= moment)
    )


@functools.cache
def _walk_query() -> SelectOfScalar[Session]:
    """`ChainRepository._load_walk`'s statement: every session reached from `start` by
    following merges, else continuations, for at most `depth` links."""
    link = func.coalesce(Session.merged_into, Session.continues_from)
    walk = sa_select(
        cast(bindparam("start", type_=Text), Text).label("id"), literal(0).label("depth")
    ).cte("walk", recursive=True)
    walk = walk.union_all(
        sa_select(cast(link, Text), walk.c.depth + 1)
        .join(walk, col(Session.id) == walk.c.id)
        .where(link.is_not(None), walk.c.depth < bindparam("depth"))
    )
    return select(Session).where(col(Session.id).in_(sa_select(walk.c.id)))


def _without_l1_before(owned: Any, offset: Any) -> list[Any]:
    """Conditions on `MemoryTurn`: `owned`, no L1, ordered (by `ended_at`, then `id`)
    before the newest owned turn but `offset`; none when there are fewer."""
    newest = (
        sa_select(col(MemoryTurn.ended_at), col(MemoryTurn.id))
        .where(owned)
        .order_by(col(MemoryTurn.ended_at).desc(), col(MemoryTurn.id).desc())
        .offset(offset)
        .limit(1)
        .subquery("window_start")
    )
    before = or_(
        col(MemoryTurn.ended_at) < newest.c.ended_at,
        and_(col(MemoryTurn.ended_at) == newest.c.ended_at, col(MemoryTurn.id) < newest.c.id),
    )
    return [owned, col(MemoryTurn.l1).is_(None), before]


# one session's turns without L1 past the window (the count `alone_without_l1` makes)
_WITHOUT_L1_OF_ONE = (
    sa_select(func.count())
    .select_from(MemoryTurn)
    .where(
        *_without_l1_before(
            col(MemoryTurn.session_id) == bindparam("m_owner"),
            bindparam("m_offset", type_=Integer),
        )
    )
    .scalar_subquery()
)
_MT = MemoryTurn.__table__  # type: ignore[attr-defined]
_TURN_ID = Prepared(
    sa_select(_MT.c.id).where(
        _MT.c.origin_session_id == bindparam("m_origin"), _MT.c.turn == bindparam("m_turn")
    )
)
_TURN_COLUMNS = (
    "user_text",
    "assistant_text",
    "ended_at",
    "ended_second",
    "started_at",
    "updated_at",
)
_TURN_BODY = ("user_text", "assistant_text", "ended_at")


def _store_turn(insert_into: DialectInsert) -> ClauseElement:
    """A turn's L2 as a new row, or over the turn's row when its body differs (its L1 goes:
    it summarized the old text); RETURNING the row's id only when it wrote one."""
    new = insert_into(_MT)
    changed = or_(*(_MT.c[name] != new.excluded[name] for name in _TURN_BODY))
    stale_l1 = {"l1": None, "l1_fallback": False}
    written = {name: new.excluded[name] for name in _TURN_COLUMNS}
    statement: ClauseElement = new.on_conflict_do_update(
        index_elements=[_MT.c.origin_session_id, _MT.c.turn],
        set_={**written, **stale_l1},
        where=changed,
    ).returning(_MT.c.id)
    return statement


_STORE_TURN = Prepared(
    _store_turn,
    column_keys=("session_id", "origin_session_id", "turn", "created_at", *_TURN_COLUMNS),
)
_S = Session.__table__  # type: ignore[attr-defined]
_MERGED_INTO_ONE = Prepared(sa_select(_S.c.id).where(_S.c.merged_into == bindparam("m_target")))
# a session's own count, and how many sessions were merged into it (whose turns count too)
_COUNT_WITHOUT_L1_ALONE = Prepared(
    sa_select(
        sa_select(func.count())
        .select_from(_S)
        .where(_S.c.merged_into == bindparam("m_owner"))
        .scalar_subquery(),
        _WITHOUT_L1_OF_ONE,
    )
)


class MemoryRepository(RowRepository):
    async def turn_id(self, origin_session_id: str, turn: int) -> int:
        """The row of a turn (`origin_session_id`, `turn`) that has one."""
        params = {"m_origin": origin_session_id, "m_turn": turn}
        rows = (await _TURN_ID.execute(self.db, params)).rows
        if not rows:
            raise NoResultFound(f"turn {turn} of {origin_session_id} has no memory row")
        return int(rows[0][0])

    async def store_text(self, session_id: str, turn: int, text: TurnBody) -> int | None:
        """Write a turn's L2, in one statement: a new row of the session, or over the turn's
        row when its text differs (its L1 goes: it summarized the old text). Returns the
        row's id, None when the row held this text already. A prepared statement, so
        `ended_second` is set here as the mapper's event sets it for ORM writes; every
        turn's end writes its own."""
        now = utcnow()
        params = {
            "session_id": session_id,
            "origin_session_id": session_id,
            "turn": turn,
            "user_text": text.user_text,
            "assistant_text": text.assistant_text,
            "ended_at": text.ended_at,
            "ended_second": second_of_day(text.ended_at),
            "started_at": text.started_at,
            "created_at": now,
            "updated_at": now,
        }
        rows = (await _STORE_TURN.execute(self.db, params)).rows
        return int(rows[0][0]) if rows else None

    async def add_details(self, rows: Sequence[MemoryDetail]) -> None:
        """Insert a turn's new L3 rows with the unit's end, in one multi-row INSERT
        (`app.db.deferred`; a turn of many tool calls flushed one ORM object at a time
        cost a flush each). Prepared statements: a turn's end stays a statement unit.
        Nothing reads their ids."""
        table = MemoryDetail.__table__  # type: ignore[attr-defined]
        for row in rows:
            deferred.defer(self.db, table, row.model_dump(exclude={"id"}))

    async def detail_sources(self, origin_session_id: str, source_ids: Sequence[str]) -> set[str]:
        """Which of `source_ids` the session's L3 holds (rows deferred in this unit too)."""
        if not source_ids:
            return set()
        await deferred.flush(self.db)
        known: set[str] = set()
        for start in range(0, len(source_ids), _SOURCES_CHUNK):
            chunk = source_ids[start : start + _SOURCES_CHUNK]
            params = {"origin": origin_session_id, **{f"s_{n}": s for n, s in enumerate(chunk)}}
            rows = (await _detail_sources(len(chunk)).execute(self.db, params)).rows
            known.update(row[0] for row in rows)
        return known

    async def sources_in(self, origins: Sequence[str], source_ids: Sequence[str]) -> set[str]:
        """Which of `source_ids` the L3 of any of these sessions holds: one range of the
        `(origin_session_id, source_id)` index per pair."""
        if not origins or not source_ids:
            return set()
        known: set[str] = set()
        for start in range(0, len(origins), 500):
            query = select(MemoryDetail.source_id).where(
                col(MemoryDetail.origin_session_id).in_(origins[start : start + 500]),
                col(MemoryDetail.source_id).in_(source_ids),
            )
            known.update((await self.db.exec(query)).all())
        return known

    async def without_l1(self, session_ids: Sequence[str], window: int) -> list[MemoryTurn]:
        """Turns of these sessions older than their newest `window`, without L1, oldest first."""
        if not session_ids:
            return []
        query = select(MemoryTurn).where(*self._without_l1(session_ids, window))
        query = query.order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
        return list((await self.db.exec(query)).all())

    async def count_without_l1(self, session_ids: Sequence[str], window: int) -> int:
        """How many turns `without_l1` would load: one count over the partial index of
        turns without L1, past the `window`-th newest turn (found by the session index).
        A chain of one session, what most turns' ends ask about, is counted by
        `alone_without_l1` instead."""
        if not session_ids:
            return 0
        query = select(func.count()).select_from(MemoryTurn)
        return int((await self.db.exec(query.where(*self._without_l1(session_ids, window)))).one())

    async def alone_without_l1(self, session_id: str, window: int) -> int | None:
        """`count_without_l1` of a session no other session was merged into, in one
        prepared statement with the look for such a merge: every turn's end of a chain
        of one session asks. None when one was (its turns count too: ask
        `count_without_l1` with `with_merged`). `window` is at least 1."""
        params = {"m_owner": session_id, "m_offset": window - 1}
        merged, count = (await _COUNT_WITHOUT_L1_ALONE.execute(self.db, params)).rows[0]
        return None if merged else int(count)

    @staticmethod
    def _without_l1(session_ids: Sequence[str], window: int) -> list[Any]:
        """Conditions on `MemoryTurn`: owned by `session_ids`, no L1, ordered (by `ended_at`,
        then `id`) before the `window`-th newest turn of them; none when there are fewer."""
        owned = col(MemoryTurn.session_id).in_(session_ids)
        if window <= 0:
            return [owned, col(MemoryTurn.l1).is_(None)]
        return _without_l1_before(owned, window - 1)

    async def texts_of(self, session_ids: Sequence[str]) -> list[TurnText]:
        """Every turn owned by these sessions, oldest first, as plain rows of the four
        columns the memory block renders.

        A long chain has a row per turn, every one read for the block; building ORM
        objects for them cost several times the query itself.
        """
        if not session_ids:
            return []
        query = (
            select(
                MemoryTurn.ended_at,
                MemoryTurn.user_text,
                MemoryTurn.assistant_text,
                MemoryTurn.l1,
            )
            .where(col(MemoryTurn.session_id).in_(session_ids))
            .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
        )
        return [TurnText(*row) for row in (await self.db.exec(query)).all()]

    async def newest_texts(
        self,
        holder: Holder,
        *,
        before: tuple[datetime, int] | None,
        limit: int,
        max_chars: int,
        wide_rows: int = 0,
        wide_chars: int = 0,
    ) -> list[NewestText]:
        """A holder's turns newest first (by `ended_at`, then `id`), after the keyset
        `before` when given, at most `limit`: the first `wide_rows` of them with texts cut
        to `wide_chars` characters, the others to `max_chars`.

        One range of the `(session_id, ended_at)` index however long the session: the
        memory block reads about as many turns, and characters, as it can show, in one
        round trip for the turns it may show whole and the first summaries after them (a
        lineage range: one range of the `(origin_session_id, turn)` index)."""
        wide_rows = min(wide_rows, limit)
        params: dict[str, Any] = {
            "session_id": holder.session_id,
            "narrow_limit": limit - wide_rows,
            "narrow_chars": max_chars,
            "wide_rows": wide_rows,
            "wide_chars": wide_chars,
        }
        if holder.turns is not None:
            params["turn_low"], high = holder.turns
            params["turn_high"] = _NO_TURN if high is None else high
        if before is not None:
            params["before_at"], params["before_id"] = before
        query = _newest_query(before is not None, wide_rows > 0, holder.turns is not None)
        return [NewestText(*row) for row in (await self.db.exec(query, params=params)).all()]

    async def chain_spans(self, chain: Sequence[str]) -> dict[str, ChainSpan]:
        """Per session owning turns of the chain (the chain's sessions and every session
        merged into one of them, directly or through others, as `ChainRepository.with_merged`
        finds them): its first and last end time (as `time_spans`) and how many turns
        happened in it by their numbers (its highest turn number less its lowest plus one,
        from the unique `(origin_session_id, turn)` index), in one statement of index
        probes however many turns there are.

        The count is exact while every turn of a session was projected (a number is dealt
        to each turn that has items): the memory block counts what it leaves out of a long
        chain with it instead of counting the chain's rows."""
        if not chain:
            return {}
        spans: dict[str, ChainSpan] = {}
        rows = (await self.db.exec(_spans_query(), params={"chain": list(chain)})).all()
        for session_id, first, last, low, high in rows:
            turns = high - low + 1 if low is not None and high is not None else 0
            spans[session_id] = ChainSpan(first, last, turns)
        return spans

    async def range_spans(self, holders: Sequence[Holder]) -> dict[Holder, ChainSpan]:
        """`chain_spans` of lineage ranges: per range holding turns, its first and last end
        time and how many turns it holds by their numbers, from index probes."""
        spans: dict[Holder, ChainSpan] = {}
        for holder in holders:
            held = holder.holds()
            query: Any = sa_select(
                select(func.min(MemoryTurn.ended_at)).where(held).scalar_subquery(),
                select(func.max(MemoryTurn.ended_at)).where(held).scalar_subquery(),
                select(func.min(MemoryTurn.turn)).where(held).scalar_subquery(),
                select(func.max(MemoryTurn.turn)).where(held).scalar_subquery(),
            )
            first, last, low, high = (await self.db.exec(query)).one()
            if first is not None:
                spans[holder] = ChainSpan(first, last, high - low + 1)
        return spans

    async def time_spans(
        self, holders: Sequence[Holder]
    ) -> dict[Holder, tuple[datetime, datetime, datetime | None]]:
        """The first and last end time of each holder's turns, and when its first turn
        began (None when it does not know), holders with no turns left out.

        Correlated subqueries rather than one `min(), max()`: each alone is answered from
        an end of the `(session_id, ended_at)` index, together they scan the range.
        """
        found: dict[Holder, tuple[datetime, datetime, datetime | None]] = {}
        for holder in holders:
            if holder.turns is None:
                continue
            held = holder.holds()
            first = select(func.min(MemoryTurn.ended_at)).where(held).scalar_subquery()
            last = select(func.max(MemoryTurn.ended_at)).where(held).scalar_subquery()
            began = (
                select(MemoryTurn.started_at)
                .where(held)
                .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
                .limit(1)
                .scalar_subquery()
            )
            spanned: Any = sa_select(first, last, began)
            start, end, begin = (await self.db.exec(spanned)).one()
            if start is not None and end is not None:
                found[holder] = (start, end, begin)
        session_ids = [h.session_id for h in holders if h.turns is None]
        if not session_ids:
            return found
        owned = MemoryTurn.session_id == Session.id
        first = select(func.min(MemoryTurn.ended_at)).where(owned).scalar_subquery()
        last = select(func.max(MemoryTurn.ended_at)).where(owned).scalar_subquery()
        began = (
            select(MemoryTurn.started_at)
            .where(owned)
            .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
            .limit(1)
            .scalar_subquery()
        )
        query = select(Session.id, first, last, began).where(col(Session.id).in_(session_ids))
        for session_id, start, end, begin in (await self.db.exec(query)).all():
            if start is not None and end is not None:
                found[Holder(session_id)] = (start, end, begin)
        return found

    async def turns_between(
        self, holders: Sequence[Holder], start: datetime, end: datetime
    ) -> list[Spanned]:
        """The turns of these holders that ended in `[start, end)`."""
        if not holders:
            return []
        query: Any = sa_select(*_SPANNED).where(
            held_by(holders),
            col(MemoryTurn.ended_at) >= start,
            col(MemoryTurn.ended_at) < end,
        )
        return list(map(_spanned, (await self.db.exec(query)).all()))

    async def first_ending_after(self, probes: Sequence[tuple[Holder, datetime]]) -> list[Spanned]:
        """Per `(holder, moment)`, the holder's first turn that ended after the moment, if
        it began by then: the only one of it that may be running at the moment (a session's
        turns follow each other).

        The probes of owners (every session never forked or rewound) are one statement
        whatever their number (a time of day probes every day of a chain): one parameter (a
        JSON array on SQLite, two arrays on PostgreSQL), each an index probe the database
        runs itself; a statement of one subquery per probe cost SQLAlchemy ~1 ms each to
        build. A lineage range's probes, rarer, are one subquery each, `_PROBES` of them to
        a statement."""
        owned = [(h.session_id, moment) for h, moment in probes if h.turns is None]
        ranged = [(h, moment) for h, moment in probes if h.turns is not None]
        found: list[Spanned] = []
        if owned:
            postgresql = self.db.get_bind().dialect.name == "postgresql"
            params: dict[str, Any]
            if postgresql:
                params = {"sessions": [s for s, _ in owned], "moments": [m for _, m in owned]}
            else:
                params = {"probes": json.dumps([[s, _sqlite_moment(m)] for s, m in owned])}
            rows = (await self.db.exec(_probes_query(postgresql), params=params)).all()
            found.extend(map(_spanned, rows))
        for start in range(0, len(ranged), _PROBES):
            parts = [
                _began_by(
                    sa_select(*_SPANNED)
                    .where(holder.holds(), col(MemoryTurn.ended_at) > moment)
                    .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
                    .limit(1)
                    .subquery(),
                    moment,
                )
                for holder, moment in ranged[start : start + _PROBES]
            ]
            query: Any = union_all(*parts) if len(parts) > 1 else parts[0]
            found.extend(map(_spanned, (await self.db.exec(query)).all()))
        return found

    async def turns_at_seconds(
        self, holders: Sequence[Holder], ranges: Sequence[tuple[int, int]]
    ) -> list[Spanned]:
        """The turns of these holders that ended in these (inclusive) ranges of seconds of
        the UTC day: one range of `(session_id, ended_second)` per session and range."""
        found: list[Spanned] = []
        if not holders:
            return found
        for low, high in ranges:
            query: Any = sa_select(*_SPANNED).where(
                held_by(holders),
                col(MemoryTurn.ended_second) >= low,
                col(MemoryTurn.ended_second) <= high,
            )
            found.extend(map(_spanned, (await self.db.exec(query)).all()))
        return found

    async def details_of(self, turn_ids: Sequence[int]) -> list[MemoryDetail]:
        if not turn_ids:
            return []
        query = (
            select(MemoryDetail)
            .where(col(MemoryDetail.turn_id).in_(turn_ids))
            .order_by(col(MemoryDetail.id))
        )
        return list((await self.db.exec(query)).all())

    async def set_l1(self, turn_id: int, text: str, *, fallback: bool) -> None:
        await self.db.exec(
            update(MemoryTurn)
            .where(col(MemoryTurn.id) == turn_id)
            .values(l1=text, l1_fallback=fallback, updated_at=utcnow())
        )

    async def move_turns(self, from_session: str, to_session: str, limit: int) -> int:
        """Move at most `limit` of a session's turns (oldest first) to another; returns
        how many moved (fewer than `limit`: none are left)."""
        ids = (
            await self.db.exec(
                select(MemoryTurn.id)
                .where(col(MemoryTurn.session_id) == from_session)
                .order_by(col(MemoryTurn.id))
                .limit(limit)
            )
        ).all()
        if not ids:
            return 0
        await self.db.exec(
            update(MemoryTurn)
            .where(col(MemoryTurn.id).in_(ids))
            .values(session_id=to_session, updated_at=utcnow())
        )
        return len(ids)

    async def newest_turns(
        self, holders: Sequence[Holder], *, limit: int, before: tuple[datetime, int] | None
    ) -> list[MemoryTurn]:
        """Turns these hold, newest first (by `ended_at`, then `id`), those ordered before
        `before` when it is given: one range of the session index each."""
        if not holders:
            return []
        query = select(MemoryTurn).where(held_by(holders))
        if before is not None:
            query = query.where(_older_than(*before))
        query = query.order_by(col(MemoryTurn.ended_at).desc(), col(MemoryTurn.id).desc())
        return list((await self.db.exec(query.limit(limit))).all())


class ChainRepository:
    """Sessions linked by continuation and merges."""

    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def predecessors(self, session: Session, limit: int = 1000) -> list[Session]:
        """The sessions this one continues, nearest first (cycles are cut)."""
        chain: list[Session] = []
        seen = {session.id}
        current = session.continues_from
        loaded = {row.id: row for row in await self._load_walk(current, limit)} if current else {}
        while current and current not in seen and len(chain) < limit:
            row = loaded.get(current) or await self.db.get(Session, current)
            if row is None:
                break
            seen.add(row.id)
            if row.merged_into:  # its turns and its link live in the merge target now
                current = row.merged_into
                continue
            chain.append(row)
            current = row.continues_from
        return chain

    async def _load_walk(self, start: str, limit: int) -> list[Session]:
        """Load every session the walk from `start` reaches in one query.

        The walk in `predecessors` then follows them in memory instead of asking one
        query per link (a round trip per session of the chain). The
        recursive CTE follows the same links (the merge target if any, else the predecessor)
        and stops after twice the walk's limit, cycles included; it only loads rows, the
        walk still decides what the chain is.
        """
        query = _walk_query()
        rows = await self.db.exec(query, params={"start": start, "depth": 2 * limit})
        return list(rows.all())

    async def merged_into_these(self, session_ids: Sequence[str]) -> list[str]:
        if len(session_ids) == 1:  # a chain of one session, at every turn's end
            rows = (await _MERGED_INTO_ONE.execute(self.db, {"m_target": session_ids[0]})).rows
            return [str(row[0]) for row in rows]
        found: list[str] = []
        for start in range(0, len(session_ids), 500):
            chunk = session_ids[start : start + 500]
            query = select(Session.id).where(col(Session.merged_into).in_(chunk))
            found.extend((await self.db.exec(query)).all())
        return found

    async def with_merged(self, session_ids: Sequence[str]) -> list[str]:
        """These sessions and every session merged into them, directly or through others.

        A merge is decided in one small transaction and its turns move afterwards in
        chunks; until the last chunk some still belong to the merged session. Reads of
        the turns a session owns ask for all of these, so a merge half-way through its
        moves reads exactly like a finished one (one indexed query when nothing was
        merged)."""
        found = list(dict.fromkeys(session_ids))
        seen = set(found)
        frontier = found
        while frontier:
            frontier = [s for s in await self.merged_into_these(frontier) if s not in seen]
            seen.update(frontier)
            found.extend(frontier)
        return found

    async def latest_in_project(
        self, tenant: str, source: str, projects: Sequence[str]
    ) -> Session | None:
        """The newest session of the project (any of `projects`: a folder and its git root)
        that is the end of its chain: not merged away, no subagent's thread, and continued
        by no other session of the same `source` (that is not merged away itself).

        A session of another source (a native Strata session created with `continues_from`
        on it) reads the chain without ending it: the client's next session still continues
        its own chain and gets its memory."""
        later = aliased(Session)
        successor = sa_select(literal(1)).where(
            col(later.continues_from) == col(Session.id),
            col(later.source) == source,
            col(later.merged_into).is_(None),  # a merged-away session continues nothing now
        )
        query = (
            select(Session)
            .where(
                Session.tenant == tenant,
                Session.source == source,
                col(Session.project).in_(list(projects)),
                col(Session.merged_into).is_(None),
                col(Session.parent_session_id).is_(None),  # a subagent's thread is no successor
                ~successor.exists(),
            )
            .order_by(col(Session.created_at).desc(), col(Session.id).desc())
            .limit(1)
        )
        return (await self.db.exec(query)).first()

    async def by_external_id(self, tenant: str, source: str, external_id: str) -> Session | None:
        query = select(Session).where(
            Session.tenant == tenant, Session.source == source, Session.external_id == external_id
        )
        return (await self.db.exec(query)).first()


_NO_TURN = 2**31 - 1  # the largest turn number (an INTEGER): the bound of an open range
_PROBES = 200  # index probes of a lineage range's `first_ending_after` in one statement
_SOURCES_CHUNK = 50  # source ids per look-up at most: a prepared statement per count up to it


@functools.cache
def _detail_sources(count: int) -> Prepared:
    wanted = [bindparam(f"s_{n}", type_=String()) for n in range(count)]
    return Prepared(
        sa_select(MemoryDetail.source_id).where(  # type: ignore[call-overload]
            col(MemoryDetail.origin_session_id) == bindparam("origin"),
            col(MemoryDetail.source_id).in_(wanted),
        )
    )
