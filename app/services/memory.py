"""Layered memory over the log: project turns into L2/L3, render the memory block,
answer detail look-ups, merge sessions.

Projection is idempotent: a turn is keyed by (origin session, turn number) and
each L3 detail by (origin session, source id), so projecting a turn again (after
a crash, or when a transcript is posted twice) changes nothing.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryDetail, Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.memory import (
    ChainRepository,
    ChainSpan,
    FoundTurn,
    Holder,
    MemoryRepository,
    NewestText,
    TurnBody,
)
from app.db.repositories.rows import RowRepository
from app.db.repositories.sessions import SessionRepository
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.items import ItemPayload, load_payload
from app.domain.lineage import Span
from app.domain.sessions import CLAUDE_CODE_SOURCE
from app.memory.details import DetailEntry, DetailPage, DetailQuery, TurnDetail, detail_page
from app.memory.noise import Boilerplate, CleanedTexts, fingerprint
from app.memory.projection import Detail, TurnItem, TurnProjection, project_turn, texts_to_clean
from app.memory.render import LINE_MAX, BlockCounts, DetailHint, MemoryBlockBuilder
from app.memory.render import MemoryTurn as RenderedTurn
from app.memory.timeref import parse_time_ref, utc_second_ranges
from app.services.chain_turns import NewestTurns
from app.services.items import read_lineage
from app.services.sessions import get_session
from app.settings import Settings


async def resolve(db: AsyncSession, tenant: str, session_id: str) -> Session:
    """The session, or the one it was merged into: merged sessions read through it."""
    session = await get_session(db, tenant, session_id)
    seen = {session.id}
    while session.merged_into and session.merged_into not in seen:
        session = await get_session(db, tenant, session.merged_into)
        seen.add(session.id)
    return session


async def clean_ahead(payloads: Iterable[ItemPayload], *, thread_chars: int) -> CleanedTexts:
    """The texts a turn's projection cleans (`texts_to_clean`) of items with these payloads,
    cleaned before the write transaction that projects it (`project_turns`), which then
    only looks them up: a turn's end holds no transaction, and on SQLite no writer thread,
    while its tool outputs are cleaned. Past `thread_chars` characters they are cleaned
    on a thread of their own, so that the caller's event loop serves its other jobs
    meanwhile; fewer cost less than the hand-off."""
    texts = list(texts_to_clean(payloads))
    if sum(map(len, texts)) <= thread_chars:
        return CleanedTexts(texts)
    return await asyncio.to_thread(CleanedTexts, texts)


async def project_turns(
    db: AsyncSession,
    session_id: str,
    turns: Iterable[int],
    cleaned: CleanedTexts | None = None,
) -> int:
    """Write L2/L3 for these turns of the session's log; returns how many turns changed.
    `cleaned`: the turns' texts cleaned ahead (`clean_ahead`); others are cleaned here."""
    wanted = sorted(set(turns))
    if not wanted:
        return 0
    cleaned = CleanedTexts() if cleaned is None else cleaned
    by_turn: dict[int, list[TurnItem]] = defaultdict(list)
    for row in await ItemRepository(db).of_turns(session_id, wanted):
        payload = load_payload(row.kind, row.payload)
        key = row.source_id or f"item:{row.seq}"
        by_turn[row.turn].append(TurnItem(key=key, payload=payload, at=row.created_at))
    changed = 0
    for turn in wanted:
        projection = project_turn(
            turn, by_turn.get(turn, []), Boilerplate(cleaner=cleaned), cleaned
        )
        if projection is None:
            continue
        changed += await _store_projection(db, session_id, projection, cleaned)
    return changed


async def _store_projection(
    db: AsyncSession, session_id: str, projection: TurnProjection, cleaned: CleanedTexts
) -> int:
    """Every turn's end writes its own: prepared statements, no ORM rows. Returns 1 when
    the turn's L2 changed."""
    turn = projection.turn
    repo = MemoryRepository(db)
    body = TurnBody(
        projection.user_text, projection.assistant_text, projection.ended_at, projection.started_at
    )
    turn_id = await repo.store_text(session_id, turn, body)
    changed = int(turn_id is not None)
    details = [_dedupe_key(d, cleaned) for d in projection.details]
    known = await repo.detail_sources(session_id, [d.source_id for d in details])
    known |= await _systems_of_chain(db, session_id, details, known)
    new: list[Detail] = []
    for detail in details:
        if detail.source_id not in known:
            known.add(detail.source_id)
            new.append(detail)
    if not new:
        return changed
    if turn_id is None:  # its text was kept: its row is the one there
        turn_id = await repo.turn_id(session_id, turn)
    await repo.add_details(
        [
            MemoryDetail(
                turn_id=turn_id,
                origin_session_id=session_id,
                kind=detail.kind,
                source_id=detail.source_id,
                tool_name=detail.tool_name,
                is_error=detail.is_error,
                text=detail.text,
            )
            for detail in new
        ]
    )
    return changed


async def _systems_of_chain(
    db: AsyncSession, session_id: str, details: list[Detail], known: set[str]
) -> set[str]:
    """Which of the turn's system texts new to the session the earlier sessions of its
    chain hold already: what Claude Code attaches to every session alike (the skill
    listing, ~2,700 identical characters each time) is kept once per chain. Asked only
    when a system text is new to the session, which is rare past its first turns."""
    fresh = [d.source_id for d in details if d.kind == "system" and d.source_id not in known]
    if not fresh:
        return set()
    session = await RowRepository(db).by_id(Session, session_id)
    if session is None or not has_predecessors(session):
        return set()
    owners = [o for o in await owners_of(db, session) if o != session_id]
    return await MemoryRepository(db).sources_in(owners, fresh)


def _dedupe_key(detail: Detail, cleaned: CleanedTexts) -> Detail:
    """A system message is keyed by its content: boilerplate repeated every turn is kept once
    per session, and once per chain (`_systems_of_chain`)."""
    if detail.kind != "system":
        return detail
    return Detail(
        kind=detail.kind,
        source_id=f"system:{fingerprint(detail.text, cleaned)}",
        tool_name=detail.tool_name,
        text=detail.text,
    )


async def chain_of(db: AsyncSession, session: Session) -> list[Session]:
    """The predecessor chain, nearest first (the session itself not included)."""
    return await ChainRepository(db).predecessors(session)


def has_predecessors(session: Session) -> bool:
    """Whether `session` continues a chain (or reads through the one it was merged into):
    only then has it a memory block, whose turns are never its own."""
    return session.continues_from is not None or session.merged_into is not None


async def owners_of(db: AsyncSession, session: Session) -> list[str]:
    """The sessions whose turns a session's chain holds: it, its predecessors, and every
    session merged into one of them (its turns may not all have moved yet)."""
    chain = [session.id, *[s.id for s in await chain_of(db, session)]]
    return await ChainRepository(db).with_merged(chain)


@dataclass(frozen=True)
class Memory:
    """Where the memory turns of some sessions are. `kept`: the turns the model may see
    (the memory block, search, the timeline); `reverted`: those a rewind took back, which
    the detail look-up and the turn list still show, flagged.

    A session never forked or rewound holds every turn it owns. A forked or rewound one
    holds the turns its log reads, through its lineage as the log view reads it
    (`app.services.items.read_lineage`): a turn is its log's when its first item is, so a
    fork shares its parent's turns up to the fork point and none after, without a copy,
    and an undo (a rewind to the old head) brings the reverted turns back."""

    kept: list[Holder]
    reverted: list[Holder]

    @property
    def every(self) -> list[Holder]:
        return [*self.kept, *self.reverted]

    def is_reverted(self, origin: str, turn: int) -> bool:
        return any(holder.covers(origin, turn) for holder in self.reverted)


async def memory_of(db: AsyncSession, sessions: list[Session], *, merged: bool = True) -> Memory:
    """The memory of these sessions (a chain) and, with `merged`, of every session merged
    into them (a caller that finds those itself, as `MemoryRepository.chain_spans`, says
    no)."""
    kept: list[Holder] = []
    reverted: list[Holder] = []
    for session in sessions:
        lineage = await read_lineage(db, session.id, session.lineage)
        if lineage is None:
            kept.append(Holder(session.id))
            continue
        now = await _turn_ranges(db, lineage.spans)
        ever = await _turn_ranges(db, lineage.history[0][1])  # every item it ever read
        kept.extend(now)
        reverted.extend(_without(ever, now))
        # the turns of sessions merged into it are its memory but not its log's: read by
        # their origin, wherever the merge has moved them yet
        into = await ChainRepository(db).with_merged([session.id])
        kept.extend(Holder(other, (0, None)) for other in into[1:])
    if merged:
        known = [s.id for s in sessions]
        read = {holder.session_id for holder in kept}
        found = await ChainRepository(db).with_merged(known)
        kept.extend(Holder(owner) for owner in found[len(known) :] if owner not in read)
    return Memory(kept, reverted)


async def reverted_where_they_happened(
    db: AsyncSession, turns: Iterable[tuple[str, int]]
) -> set[tuple[str, int]]:
    """Which of these turns (`(origin session, number)`) a rewind of the session they
    happened in took back: what a search of every session leaves out. A fork that still
    reads such a turn finds it through its own chain (`chain_memory`)."""
    wanted = set(turns)
    origins = sorted({origin for origin, _ in wanted})
    taken: set[tuple[str, int]] = set()
    for session in await SessionRepository(db).with_lineage(origins):
        memory = await memory_of(db, [session], merged=False)
        taken |= {
            (origin, turn)
            for origin, turn in wanted
            if origin == session.id and memory.is_reverted(origin, turn)
        }
    return taken


async def chain_memory(db: AsyncSession, session: Session) -> Memory:
    """The memory of a session's chain: its own, its predecessors' and the merged ones'."""
    return await memory_of(db, [session, *await chain_of(db, session)])


async def _turn_ranges(db: AsyncSession, spans: Iterable[Span]) -> list[Holder]:
    repo = ItemRepository(db)
    ranges: list[Holder] = []
    for span in spans:
        turns = await repo.turns_starting_in(span.source, span.after, span.upto)
        if turns is not None:
            ranges.append(Holder(span.source, turns))
    return ranges


def _without(ranges: list[Holder], taken: list[Holder]) -> list[Holder]:
    """The parts of `ranges` no range of `taken` covers."""
    left: list[Holder] = []
    for holder in ranges:
        assert holder.turns is not None
        pieces = [holder.turns]
        for other in taken:
            if other.session_id != holder.session_id or other.turns is None:
                continue
            low, high = other.turns
            cut: list[tuple[int, int | None]] = []
            for start, end in pieces:
                if (end is not None and end < low) or (high is not None and high < start):
                    cut.append((start, end))
                    continue
                if start < low:
                    cut.append((start, low - 1))
                if high is not None and (end is None or high < end):
                    cut.append((high + 1, end))
            pieces = cut
        left.extend(Holder(holder.session_id, piece) for piece in pieces)
    return left


@dataclass(frozen=True)
class MemoryBlock:
    session_id: str
    text: str
    counts: BlockCounts
    chain: list[str]


@dataclass(frozen=True)
class BlockLimits:
    """How large a memory block may be: L2 turns, characters, and L2's share of them."""

    window: int
    max_chars: int
    l2_ratio: float

    @classmethod
    def of(cls, settings: Settings, max_chars: int | None = None) -> BlockLimits:
        """The configured limits; `max_chars` instead of the configured length if given."""
        return cls(
            settings.memory_l2_window_turns,
            max_chars or settings.memory_block_max_chars,
            settings.memory_block_l2_ratio,
        )


async def memory_block(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    *,
    limits: BlockLimits,
    tz: ZoneInfo,
    hint: DetailHint | None = None,
    claude_code_hint: DetailHint = DetailHint.sc_detail,
) -> MemoryBlock:
    """What a continuing session starts with: its predecessors' turns (as their memory
    holds them: a fork's shared ones, no reverted one), never its own, in at most
    `max_chars` characters.

    The turns are read newest first and only while the block has room, with their texts cut
    in SQL to what the block could show, so its cost follows the budget and not the chain.
    The count of turns left out comes from turn numbers (index probes per session) unless
    every turn was read. `hint`: the look-up the guide line names; without it, a Claude Code
    session's reader has `claude_code_hint` and any other session's agent its Detail tool.
    """
    session = await resolve(db, tenant, session_id)
    predecessors = await chain_of(db, session)
    chain = [s.id for s in predecessors]
    repo = MemoryRepository(db)
    memory = await memory_of(db, predecessors, merged=False)
    owners = [h.session_id for h in memory.kept if h.turns is None]
    spans: dict[Holder, ChainSpan] = {  # the sessions merged into them included
        Holder(owner): span for owner, span in (await repo.chain_spans(owners)).items()
    }
    spans.update(await repo.range_spans([h for h in memory.kept if h.turns is not None]))
    ends = {holder: (s.first, s.last) for holder, s in spans.items() if s.first and s.last}
    oldest = min((first for first, _ in ends.values()), default=None)
    if hint is None:
        claude_code = session.source == CLAUDE_CODE_SOURCE
        hint = claude_code_hint if claude_code else DetailHint.detail_tool
    window = limits.window
    builder = MemoryBlockBuilder(limits.max_chars, window, tz, hint, oldest, limits.l2_ratio)
    newest = NewestTurns(
        repo,
        {owner: last for owner, (_, last) in ends.items()},
        window=window + 1,  # one more, to know whether older turns follow
        wide=limits.max_chars,
        narrow=LINE_MAX,
    )
    recent: list[RenderedTurn] = []
    while len(recent) <= window and (row := await newest.next()) is not None:
        recent.append(_rendered(row))
    for turn in [*builder.take_recent(recent, older=len(recent) > window), *recent[window:]]:
        if not builder.offer_earlier(turn):
            break
    while not builder.full and (row := await newest.next()) is not None:
        builder.offer_earlier(_rendered(row))
    counted = sum(span.turns for span in spans.values())
    total = newest.yielded if newest.exhausted else max(counted, newest.yielded)
    block = builder.render(total)
    return MemoryBlock(session.id, block.text, block.counts, chain)


def _rendered(row: NewestText) -> RenderedTurn:
    return RenderedTurn(row.ended_at, row.user_text, row.assistant_text, row.l1)


async def turns_at(
    db: AsyncSession, owners: list[Holder], reference: str, *, tz: ZoneInfo
) -> list[FoundTurn]:
    """The turns these hold whose span (from their prompt to their end) holds a time
    or overlaps a range, newest first.

    The turns that ended in it are one index range (of `ended_at`, or of the second of the
    UTC day for a time of day, on any day); a session's turns follow each other, so the
    only other turn of a session that can overlap a span is the first one that ended after
    it: one index probe per session and span its turns reach."""
    try:
        ref = parse_time_ref(reference, tz)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="time") from exc
    repo = MemoryRepository(db)
    spans = await repo.time_spans(owners)
    if isinstance(ref.start, datetime) and isinstance(ref.end, datetime):
        end = ref.end + timedelta(seconds=1)  # the bounds are whole seconds, inclusive
        candidates = await repo.turns_between(owners, ref.start, end)
    else:  # a time of day matches on every day: by the second of the UTC day it ended in
        first = min((span[0] for span in spans.values()), default=None)
        last = max((span[1] for span in spans.values()), default=None)
        ranges = utc_second_ranges(ref, first, last, tz) if first and last else []
        candidates = await repo.turns_at_seconds(list(spans), ranges)
    probes = [
        (owner, window_end)
        for owner, (first_end, last_end, began) in spans.items()
        for _, window_end in ref.windows(began or first_end, last_end, tz)
        if (began or first_end) <= window_end < last_end
    ]
    found = {t.id: (t, began) for t, began in [*candidates, *await repo.first_ending_after(probes)]}
    matching = [
        t for t, began in found.values() if ref.overlaps(began or t.ended_at, t.ended_at, tz)
    ]
    matching.sort(key=lambda t: (t.ended_at, t.id), reverse=True)
    return matching


async def detail(
    db: AsyncSession, tenant: str, session_id: str, reference: str, *, tz: ZoneInfo
) -> list[TurnDetail]:
    """L2 and L3 of the turns at a time (or in a range) across the chain, newest first,
    reverted ones too (flagged)."""
    session = await resolve(db, tenant, session_id)
    memory = await chain_memory(db, session)
    matching = await turns_at(db, memory.every, reference, tz=tz)
    if not matching:
        raise NotFound(f"no turn of this session's chain ran at {reference!r}", time=reference)
    repo = MemoryRepository(db)
    grouped: dict[int, dict[str, list[DetailEntry]]] = defaultdict(lambda: defaultdict(list))
    for row in await repo.details_of([t.id for t in matching]):
        entry = DetailEntry(row.source_id, row.tool_name, row.text, row.is_error)
        grouped[row.turn_id][row.kind].append(entry)
    return [
        TurnDetail(
            session_id=t.origin_session_id,
            turn=t.turn,
            ended_at=t.ended_at,
            user_text=t.user_text,
            assistant_text=t.assistant_text,
            l1=t.l1,
            details=dict(grouped.get(t.id, {})),
            reverted=memory.is_reverted(t.origin_session_id, t.turn),
        )
        for t in matching
    ]


async def detail_page_of(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    reference: str,
    query: DetailQuery,
    *,
    tz: ZoneInfo,
) -> DetailPage:
    """One page of the detail look-up: at most `query.max_chars` characters, filtered."""
    return detail_page(await detail(db, tenant, session_id, reference, tz=tz), query, tz=tz)


async def merge_sessions(
    db: AsyncSession, tenant: str, session_id: str, into: str, *, chunk: int
) -> tuple[Session, int]:
    """Merge a session into another: one small transaction decides it, whatever the size.

    It sets `merged_into` and moves the chain link; from its commit on, reads of either
    session see the merged state, since every read of a session's turns includes the
    sessions merged into it (`owners_of`). The turns themselves move afterwards, at most
    `chunk` per transaction (`move_merged_turns`; the first chunk here); which session a
    turn row names meanwhile changes nothing a reader sees, so no reader can see half a
    merge, and a merge whose moves stopped half-way (a crash, a failed chunk) reads as
    merged and is finished by asking for it again. Returns the target and how many turns
    this transaction moved (`chunk`: there may be more).
    """
    if session_id == into:
        raise InvalidInput("a session cannot be merged into itself", field="into")
    source = await get_session(db, tenant, session_id)
    target = await resolve(db, tenant, into)
    if source.merged_into is not None:
        if (await resolve(db, tenant, source.id)).id != target.id:
            raise Conflict(f"session {session_id!r} was already merged into {source.merged_into!r}")
        # asked again: finish moving what a stopped merge left behind
        return target, await MemoryRepository(db).move_turns(source.id, target.id, chunk)
    if target.id == source.id or source.id in {s.id for s in await chain_of(db, target)}:
        raise Conflict("the target continues this session; merging would make a cycle")
    if target.continues_from is None and source.continues_from not in (None, target.id):
        target.continues_from = source.continues_from
    source.merged_into = target.id
    source.updated_at = target.updated_at = utcnow()
    await RowRepository(db).save_all(source, target)
    return target, await MemoryRepository(db).move_turns(source.id, target.id, chunk)


async def move_merged_turns(db: AsyncSession, source_id: str, target_id: str, chunk: int) -> int:
    """One more chunk of a decided merge's turns; returns how many moved."""
    return await MemoryRepository(db).move_turns(source_id, target_id, chunk)
