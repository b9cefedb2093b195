"""The turns of a session's chain as a timeline: when each ended and what it was about.

A client picks a time from it for the detail look-up (`GET /sessions/{id}/detail/{time}`),
so the timeline reads the same turns the look-up does: the session's, its predecessors'
and those of sessions merged into them, newest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryTurn
from app.db.repositories.memory import MemoryRepository
from app.domain.errors import InvalidInput
from app.memory.l1 import one_line
from app.memory.render import cut
from app.services.memory import chain_memory, resolve
from app.services.pagination import Page, page_of

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_LATEST = datetime.max.replace(tzinfo=UTC)
CURSOR_PATTERN = r"^[0-9]{1,18}\.[0-9]{1,18}$"
_CURSOR = re.compile(CURSOR_PATTERN)


@dataclass(frozen=True)
class TurnEntry:
    session_id: str
    turn: int
    ended_at: datetime
    preview: str
    reverted: bool = False  # a rewind took it back


def cursor_of(row: MemoryTurn) -> str:
    """`<end time in microseconds since the epoch>.<row id>`: the order of the timeline."""
    return f"{(row.ended_at - _EPOCH) // _MICROSECOND}.{row.id}"


def parse_cursor(value: str | None) -> tuple[datetime, int] | None:
    if value is None:
        return None
    if not _CURSOR.match(value):
        raise InvalidInput("after: not a cursor of this list", field="after")
    micros, row_id = value.split(".")
    try:
        return _EPOCH + int(micros) * _MICROSECOND, int(row_id)
    except OverflowError:
        # past the year 9999, which the pattern admits: later than every turn, so the
        # page starts at the newest (as an item cursor past the end answers its page)
        return _LATEST, int(row_id)


def preview_of(row: MemoryTurn, max_chars: int) -> str:
    """The turn's L1 summary when it has one, else the start of what the user said."""
    return cut(one_line(row.l1 or row.user_text or row.assistant_text), max_chars)


async def timeline(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    *,
    limit: int,
    after: str | None,
    preview_chars: int,
) -> Page[TurnEntry]:
    before = parse_cursor(after)
    memory = await chain_memory(db, await resolve(db, tenant, session_id))
    rows = await MemoryRepository(db).newest_turns(memory.every, limit=limit + 1, before=before)
    page = page_of(rows, limit, cursor_of)
    entries = [
        TurnEntry(
            r.origin_session_id,
            r.turn,
            r.ended_at,
            preview_of(r, preview_chars),
            memory.is_reverted(r.origin_session_id, r.turn),
        )
        for r in page.data
    ]
    return Page(data=entries, next_cursor=page.next_cursor)
