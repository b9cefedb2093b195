"""The event log: append with a race-free `seq`, read in `seq` order."""

from __future__ import annotations

from sqlalchemy.exc import NoResultFound
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Item
from app.db.repositories.items import ItemRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import InvalidInput
from app.domain.items import ItemPayload, Origin, dump_payload, starts_turn
from app.services.pagination import Page, page_of
from app.services.sessions import get_session


async def append_item(
    db: AsyncSession, session_id: str, payload: ItemPayload, origin: Origin
) -> Item:
    """Append one item. The caller has checked that the session is the tenant's."""
    try:
        slot = await SessionRepository(db).allocate_seq(session_id, new_turn=starts_turn(payload))
    except NoResultFound as exc:  # the session vanished between check and append
        raise InvalidInput(f"session {session_id!r} does not exist") from exc
    row = Item(
        session_id=session_id,
        seq=slot.seq,
        turn=slot.turn,
        segment=slot.segment,
        kind=payload.kind,
        origin=origin.value,
        payload=dump_payload(payload),
    )
    return await ItemRepository(db).add(row)


async def list_items(
    db: AsyncSession, tenant: str, session_id: str, *, limit: int, after: str | None
) -> Page[Item]:
    await get_session(db, tenant, session_id)
    after_seq = parse_seq_cursor(after)
    rows = await ItemRepository(db).list_page(session_id, after_seq=after_seq, limit=limit + 1)
    return page_of(rows, limit, lambda row: str(row.seq))


def parse_seq_cursor(after: str | None) -> int:
    if after is None:
        return 0
    if not after.isdigit():
        raise InvalidInput("'after' must be the next_cursor of a previous page", field="after")
    return int(after)
