"""The event log: append with a race-free `seq`, read in `seq` order."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from enum import Enum, auto
from typing import Any, Literal

from sqlalchemy.exc import NoResultFound
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Item
from app.db.models.item import SEQ_MAX, AppendedItem
from app.db.repositories.items import ItemRepository
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SeqSlot, SessionRepository
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput
from app.domain.items import (
    ItemPayload,
    Origin,
    dump_payload,
    load_payload,
    starts_turn,
    tool_name_of,
)
from app.domain.lineage import Lineage
from app.domain.usage import Usage
from app.services.events import record_event
from app.services.pagination import Page, page_of
from app.services.sessions import check_session, no_session


async def append_item(
    db: AsyncSession,
    session_id: str,
    payload: ItemPayload,
    origin: Origin,
    *,
    turn: int | None = None,
    job_id: str | None = None,
    at: datetime | None = None,
    source_id: str | None = None,
    joins_turn: bool = False,
) -> AppendedItem:
    """Append one item and its `item.appended` event.

    The caller has checked that the session is the tenant's. A job passes the
    turn it was given at enqueue; without one, a user message opens a new turn unless it
    `joins_turn` (words a user typed while the agent worked, imported from Claude Code).
    """
    new_turn = turn is None and not joins_turn and starts_turn(payload)
    slot = await _allocated(
        session_id, SessionRepository(db).allocate_seq(session_id, new_turn=new_turn)
    )
    return await add_item(
        db, session_id, slot, payload, origin, turn=turn, job_id=job_id, at=at, source_id=source_id
    )


async def append_answered(
    db: AsyncSession,
    session_id: str,
    payload: ItemPayload,
    *,
    turn: int | None,
    job_id: str,
    wrote_tasks: bool,
    usage: Usage | None,
    carried_reminder: bool,
) -> AppendedItem:
    """`append_item` for a running job's LLM response: its place in the log and the
    request it answered (`SessionRepository.allocate_answered`) are one statement, at
    every agent step."""
    allocating = SessionRepository(db).allocate_answered(
        session_id, wrote_tasks=wrote_tasks, usage=usage, carried_reminder=carried_reminder
    )
    slot = await _allocated(session_id, allocating)
    return await add_item(db, session_id, slot, payload, Origin.llm, turn=turn, job_id=job_id)


async def _allocated(session_id: str, allocating: Awaitable[SeqSlot]) -> SeqSlot:
    """The place an allocation gave; a session that vanished since the caller checked it
    (deleted under a running job) is the caller's bad input, not a crash."""
    try:
        return await allocating
    except NoResultFound as exc:
        raise InvalidInput(f"session {session_id!r} does not exist") from exc


async def reserve_item(
    db: AsyncSession, tenant: str, session_id: str, *, wrote_tasks: bool = False
) -> SeqSlot:
    """The place of an item that opens no turn, in a session that must be the tenant's:
    the check, the session row's lock and the `seq` allocation are one statement. For a
    write that reads the log before it appends (a REST task write replays the task
    list): once it holds the row, no concurrent write of the session can append before
    it, and its reads see every one that did (each statement of a PostgreSQL
    transaction reads what committed before it). `wrote_tasks` notes a REST task write
    for the reminder. The item is then written with `add_item`; a failure between the
    two rolls the allocation back with the rest of the unit."""
    try:
        slot = await SessionRepository(db).allocate_seq(
            session_id, new_turn=False, wrote_tasks=wrote_tasks
        )
    except NoResultFound:
        slot = None
    if slot is None or slot.tenant != tenant:
        raise no_session(session_id)
    return slot


async def add_item(
    db: AsyncSession,
    session_id: str,
    slot: SeqSlot,
    payload: ItemPayload,
    origin: Origin,
    *,
    turn: int | None = None,
    job_id: str | None = None,
    at: datetime | None = None,
    source_id: str | None = None,
) -> AppendedItem:
    """Write the item at the place `slot` reserved for it, with its `item.appended` event."""
    row = AppendedItem(
        session_id=session_id,
        seq=slot.seq,
        turn=slot.turn if turn is None else turn,
        segment=slot.segment,
        kind=payload.kind,
        origin=origin.value,
        tool_name=tool_name_of(payload),
        source_id=source_id,
        payload=dump_payload(payload),
        created_at=at or utcnow(),
    )
    await ItemRepository(db).add(row)
    await record_event(
        db, session_id, "item.appended", {"seq": row.seq, "kind": row.kind}, job_id=job_id
    )
    return row


async def append_client_item(
    db: AsyncSession, tenant: str, session_id: str, payload: ItemPayload, origin: Origin
) -> AppendedItem:
    """An item a client appends itself; refused while an agent turn owns the session."""
    await check_session(db, tenant, session_id)
    item = await append_item(db, session_id, payload, origin)  # locks the session row
    if await JobRepository(db).session_is_busy(session_id):
        raise Conflict(
            "the session has an agent turn queued or running; wait for it or use "
            "POST /sessions/{id}/messages",
            reason="session-busy",
        )
    return item


class Unread(Enum):
    """A session row's `lineage` not read yet (`read_lineage` reads it)."""

    UNREAD = auto()


UNREAD = Unread.UNREAD
StoredLineage = dict[str, Any] | None | Literal[Unread.UNREAD]


async def read_lineage(
    db: AsyncSession, session_id: str, stored: StoredLineage = UNREAD
) -> Lineage | None:
    """The session's lineage; None: it reads its own log whole (it was never forked or
    rewound). `stored`: the row's `lineage` column when the caller read the row already
    (a turn's start), so it is not read again."""
    if stored is UNREAD:
        stored = await SessionRepository(db).lineage(session_id)
    return None if stored is None else Lineage.from_json(stored)


async def segment_payloads(
    db: AsyncSession, session_id: str, segment: int, stored_lineage: dict[str, Any] | None
) -> list[ItemPayload]:
    """The segment's items; `stored_lineage`: the `lineage` of the session row the caller read."""
    lineage = await read_lineage(db, session_id, stored_lineage)
    return [payload for _, payload in await segment_tail(db, session_id, segment, 0, lineage)]


async def segment_tail(
    db: AsyncSession,
    session_id: str,
    segment: int,
    after_seq: int,
    lineage: Lineage | None = None,
) -> list[tuple[int, ItemPayload]]:
    """The segment's items after `after_seq`, with their seq: what a reader that
    already holds the beginning of the segment still lacks. A segment a fork or a rewind
    started (`lineage`) begins with the parts of the log it continues."""
    repo = ItemRepository(db)
    rows = []
    if lineage is not None:
        for part in lineage.parts(session_id, segment):
            if part.upto > after_seq:
                after = max(part.after, after_seq)
                rows.extend(await repo.part(part.source, part.segment, after, part.upto))
    rows.extend(await repo.segment(session_id, segment, after_seq=after_seq))
    return [(row.seq, load_payload(row.kind, row.payload)) for row in rows]


async def list_items(
    db: AsyncSession, tenant: str, session_id: str, *, limit: int, after: str | None
) -> tuple[Page[Item], Lineage | None]:
    """A page of the session's log: a fork's begins with its parent's items up to the
    fork; a rewound session's holds its reverted items too (the lineage says which)."""
    owned = await SessionRepository(db).tenant_and_lineage(session_id)
    if owned is None or owned[0] != tenant:
        raise no_session(session_id)
    after_seq = parse_seq_cursor(after)
    repo = ItemRepository(db)
    lineage = await read_lineage(db, session_id, owned[1])
    if lineage is None:
        rows = await repo.list_page(session_id, after_seq=after_seq, limit=limit + 1)
        return page_of(rows, limit, lambda row: str(row.seq)), None
    rows = []
    for span in lineage.history[0][1]:  # the inherited spans, then every item of its own
        if len(rows) > limit:
            break
        if span.source == session_id:
            upto = None
        elif span.upto is not None and span.upto > after_seq:
            upto = span.upto
        else:
            continue
        start = max(after_seq, span.after)
        rows.extend(await repo.span_page(span.source, after_seq=start, upto=upto, limit=limit + 1))
    return page_of(rows[: limit + 1], limit, lambda row: str(row.seq)), lineage


def parse_seq_cursor(after: str | None) -> int:
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit() and len(after) <= 18):
        raise InvalidInput("'after' must be the next_cursor of a previous page", field="after")
    # nothing follows the largest seq a session can hold; past it, PostgreSQL's
    # 32-bit column would refuse the comparison itself
    return min(int(after), SEQ_MAX)
