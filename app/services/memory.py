"""Layered memory over the log: project turns into L2/L3, render the memory block,
answer detail look-ups, merge sessions.

Projection is idempotent: a turn is keyed by (origin session, turn number) and
each L3 detail by (origin session, source id), so projecting a turn again (after
a crash, or when a transcript is posted twice) changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryDetail, MemoryTurn, Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.memory import ChainRepository, MemoryRepository
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.items import load_payload
from app.memory.details import DetailEntry, TurnDetail
from app.memory.noise import Boilerplate
from app.memory.projection import Detail, TurnItem, TurnProjection, project_turn
from app.memory.render import MemoryTurn as RenderedTurn
from app.memory.render import memory_counts, render_memory_block
from app.memory.timeref import parse_time_ref
from app.services.sessions import get_session


async def resolve(db: AsyncSession, tenant: str, session_id: str) -> Session:
    """The session, or the one it was merged into: merged sessions read through it."""
    session = await get_session(db, tenant, session_id)
    seen = {session.id}
    while session.merged_into and session.merged_into not in seen:
        session = await get_session(db, tenant, session.merged_into)
        seen.add(session.id)
    return session


async def project_turns(db: AsyncSession, session_id: str, turns: Iterable[int]) -> int:
    """Write L2/L3 for these turns of the session's log; returns how many turns changed."""
    wanted = sorted(set(turns))
    if not wanted:
        return 0
    by_turn: dict[int, list[TurnItem]] = defaultdict(list)
    for row in await ItemRepository(db).of_turns(session_id, wanted):
        payload = load_payload(row.kind, row.payload)
        key = row.source_id or f"item:{row.seq}"
        by_turn[row.turn].append(TurnItem(key=key, payload=payload, at=row.created_at))
    changed = 0
    for turn in wanted:
        projection = project_turn(turn, by_turn.get(turn, []), Boilerplate())
        if projection is None:
            continue
        changed += await _store_projection(db, session_id, projection)
    return changed


async def _store_projection(db: AsyncSession, session_id: str, projection: TurnProjection) -> int:
    turn = projection.turn
    repo = MemoryRepository(db)
    row = await repo.turn(session_id, turn)
    changed = 0
    if row is None:
        row = MemoryTurn(
            session_id=session_id,
            origin_session_id=session_id,
            turn=turn,
            ended_at=projection.ended_at,
            user_text=projection.user_text,
            assistant_text=projection.assistant_text,
        )
        await repo.add(row)
        changed = 1
    elif (row.user_text, row.assistant_text, row.ended_at) != (
        projection.user_text,
        projection.assistant_text,
        projection.ended_at,
    ):
        row.user_text = projection.user_text
        row.assistant_text = projection.assistant_text
        row.ended_at = projection.ended_at
        row.l1 = None  # the body changed: its summary is stale
        row.l1_fallback = False
        row.updated_at = utcnow()
        db.add(row)
        await db.flush()
        changed = 1
    details = [_dedupe_key(d) for d in projection.details]
    known = await repo.detail_sources(session_id, [d.source_id for d in details])
    for detail in details:
        if detail.source_id in known:
            continue
        known.add(detail.source_id)
        assert row.id is not None
        await repo.add(
            MemoryDetail(
                turn_id=row.id,
                origin_session_id=session_id,
                kind=detail.kind,
                source_id=detail.source_id,
                tool_name=detail.tool_name,
                text=detail.text,
            )
        )
    return changed


def _dedupe_key(detail: Detail) -> Detail:
    """A system message is keyed by its content: boilerplate repeated every turn is kept once."""
    if detail.kind != "system":
        return detail
    return Detail(
        kind=detail.kind,
        source_id=f"system:{Boilerplate.fingerprint(detail.text)}",
        tool_name=detail.tool_name,
        text=detail.text,
    )


async def chain_of(db: AsyncSession, session: Session) -> list[Session]:
    """The predecessor chain, nearest first (the session itself not included)."""
    return await ChainRepository(db).predecessors(session)


def _rendered(rows: Sequence[MemoryTurn]) -> list[RenderedTurn]:
    return [
        RenderedTurn(
            ended_at=r.ended_at, user_text=r.user_text, assistant_text=r.assistant_text, l1=r.l1
        )
        for r in rows
    ]


@dataclass(frozen=True)
class MemoryBlock:
    session_id: str
    text: str
    counts: dict[str, int]
    chain: list[str]


async def memory_block(
    db: AsyncSession, tenant: str, session_id: str, *, window: int, tz: ZoneInfo
) -> MemoryBlock:
    """What a continuing session starts with: its predecessors' turns, never its own."""
    session = await resolve(db, tenant, session_id)
    chain = [s.id for s in await chain_of(db, session)]
    turns = _rendered(await MemoryRepository(db).turns_of(chain))
    text = render_memory_block(turns, window=window, tz=tz, detail_hint_session=session.id)
    return MemoryBlock(session.id, text, memory_counts(turns, window), chain)


async def detail(
    db: AsyncSession, tenant: str, session_id: str, reference: str, *, tz: ZoneInfo
) -> list[TurnDetail]:
    """L2 and L3 of the turns at a time (or in a range) across the chain, newest first."""
    try:
        ref = parse_time_ref(reference)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="time") from exc
    session = await resolve(db, tenant, session_id)
    owners = [session.id, *[s.id for s in await chain_of(db, session)]]
    repo = MemoryRepository(db)
    matching = [t for t in await repo.turns_of(owners) if ref.matches(t.ended_at, tz)]
    if not matching:
        raise NotFound(f"no turn of this session's chain ended at {reference!r}", time=reference)
    matching.sort(key=lambda t: (t.ended_at, t.id or 0), reverse=True)
    grouped: dict[int, dict[str, list[DetailEntry]]] = defaultdict(lambda: defaultdict(list))
    for row in await repo.details_of([t.id for t in matching if t.id is not None]):
        grouped[row.turn_id][row.kind].append(DetailEntry(row.source_id, row.tool_name, row.text))
    return [
        TurnDetail(
            session_id=t.origin_session_id,
            turn=t.turn,
            ended_at=t.ended_at,
            user_text=t.user_text,
            assistant_text=t.assistant_text,
            l1=t.l1,
            details=dict(grouped.get(t.id or -1, {})),
        )
        for t in matching
    ]


async def merge_sessions(db: AsyncSession, tenant: str, session_id: str, into: str) -> Session:
    """Move a session's turns and its chain link into another, in the caller's transaction:
    if anything fails half-way the unit of work rolls back and both stay as they were."""
    if session_id == into:
        raise InvalidInput("a session cannot be merged into itself", field="into")
    source = await get_session(db, tenant, session_id)
    target = await resolve(db, tenant, into)
    if source.merged_into is not None:
        raise Conflict(f"session {session_id!r} was already merged into {source.merged_into!r}")
    if target.id == source.id or source.id in {s.id for s in await chain_of(db, target)}:
        raise Conflict("the target continues this session; merging would make a cycle")
    await MemoryRepository(db).move_turns(source.id, target.id)
    if target.continues_from is None and source.continues_from not in (None, target.id):
        target.continues_from = source.continues_from
    source.merged_into = target.id
    source.updated_at = target.updated_at = utcnow()
    db.add(source)
    db.add(target)
    await db.flush()
    return target
