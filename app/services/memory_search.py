"""Full-text search of a tenant's memory (`app.memory.search`, `app.db.fulltext`): the
turns whose L1/L2 or whose L3 entries hold every word of a query, ranked by the index,
each shown as one line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryTurn, Session
from app.db.repositories.memory import FoundTurn, MemoryRepository
from app.db.repositories.memory_search import (
    MemorySearchRepository,
    SearchScope,
    TimelineRepository,
    project_folders,
)
from app.domain.errors import InvalidInput, NotFound
from app.domain.sessions import CLAUDE_CODE_SOURCE
from app.memory.search import Layer, SearchText, hit_line, parse_query
from app.services.memory import chain_memory, resolve, reverted_where_they_happened, turns_at
from app.settings import Settings


@dataclass(frozen=True)
class SearchLimits:
    """How many hits by default and at most, terms searched, a hit line's length, how
    many matches are ranked and how much of their texts."""

    default: int
    most: int
    terms: int
    line_chars: int
    window: int  # matches ranked at most: the newest ones
    rank_chars: int  # characters of each text the SQLite ranking counts words in

    @classmethod
    def of(cls, settings: Settings) -> SearchLimits:
        return cls(
            settings.memory_search_limit_default,
            settings.memory_search_limit_max,
            settings.memory_search_max_terms,
            settings.memory_search_line_chars,
            settings.memory_search_rank_window,
            settings.memory_search_rank_chars,
        )


@dataclass(frozen=True)
class SearchRequest:
    query: str
    project: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None


@dataclass(frozen=True)
class SearchHit:
    ended_at: datetime
    session_id: str  # the session the turn happened in (its number is of that session)
    turn: int
    layer: Layer
    line: str
    score: float


async def search(
    db: AsyncSession,
    tenant: str,
    request: SearchRequest,
    limits: SearchLimits,
    *,
    session_id: str | None = None,
) -> list[SearchHit]:
    """The best hits, best first: of the tenant's turns (but those a rewind of the session
    they happened in reverted), or of the chain of `session_id` (its predecessors and the
    sessions merged into them included) as its memory holds it (`chain_memory`: a fork's
    shared turns, no reverted one). At most `limit` (the default when None, never more
    than the most)."""
    terms = parse_query(request.query, max_terms=limits.terms)
    if not terms:
        raise InvalidInput("the query holds no word to search for", field="q")
    since, until = request.since, request.until
    if since is not None and until is not None and until <= since:
        raise InvalidInput("`until` must be after `since`", field="until")
    limit = max(1, min(request.limit or limits.default, limits.most))
    if session_id is not None:  # what its model may see: no reverted turn
        holders = (await chain_memory(db, await resolve(db, tenant, session_id))).kept
        scope = SearchScope(tenant, request.project, holders, since, until)
        hits, _ = await _hits(db, terms, scope, limit, limits)
        return hits
    scope = SearchScope(tenant, request.project, None, since, until)
    asked = limit
    while True:  # leave out what rewinds reverted, asking for more hits while some were
        hits, exhausted = await _hits(db, terms, scope, asked, limits)
        taken = await reverted_where_they_happened(db, [(h.session_id, h.turn) for h in hits])
        kept = [hit for hit in hits if (hit.session_id, hit.turn) not in taken]
        if len(kept) >= limit or exhausted:
            return kept[:limit]
        asked *= 2


async def _hits(
    db: AsyncSession, terms: list[str], scope: SearchScope, limit: int, limits: SearchLimits
) -> tuple[list[SearchHit], bool]:
    """The best `limit` hits in `scope`, and whether there are no more."""
    repo = MemorySearchRepository(db)
    hits: list[SearchHit] = []
    turns = await repo.turns(terms, scope, limit, limits.window, limits.rank_chars)
    for turn in turns:
        texts = [
            SearchText(Layer.l2, "[user]", turn.user_text),
            SearchText(Layer.l2, "[assistant]", turn.assistant_text),
            SearchText(Layer.l1, "[summary]", turn.l1 or ""),
        ]
        layer, line = hit_line(texts, terms, limits.line_chars)
        hits.append(
            SearchHit(turn.ended_at, turn.origin_session_id, turn.turn, layer, line, turn.score)
        )
    entries = await repo.details(terms, scope, limit, limits.window, limits.rank_chars)
    for entry in entries:
        label = f"[{entry.kind} {entry.tool_name}]" if entry.tool_name else f"[{entry.kind}]"
        layer, line = hit_line([SearchText(Layer.l3, label, entry.text)], terms, limits.line_chars)
        hits.append(
            SearchHit(entry.ended_at, entry.origin_session_id, entry.turn, layer, line, entry.score)
        )
    hits.sort(key=lambda hit: (hit.score, hit.ended_at), reverse=True)
    return hits[:limit], len(turns) < limit and len(entries) < limit


MIRRORED = CLAUDE_CODE_SOURCE  # the source of the sessions a caller's project means


async def default_session(
    db: AsyncSession, tenant: str, *, project: str | None, session_id: str | None
) -> Session:
    """The session a caller means: `session_id` when given (or the session it was merged
    into), else the tenant's newest mirrored Claude Code session that ends its chain, of
    `project` (a folder: sessions filed under it or a folder above it) when given."""
    if session_id is not None:
        return await resolve(db, tenant, session_id)
    folders = project_folders(project) if project is not None else None
    session = await TimelineRepository(db).newest_tip(tenant, MIRRORED, folders)
    if session is None:
        where = f" of project {project!r}" if project is not None else ""
        raise NotFound(f"no Claude Code session{where} is mirrored here; name a session_id")
    return session


@dataclass(frozen=True)
class Timeline:
    """A chain's turns around one (`anchor`), oldest first."""

    session_id: str  # the session whose chain it is
    before: list[FoundTurn]
    anchor: FoundTurn
    after: list[FoundTurn]


async def timeline(
    db: AsyncSession,
    tenant: str,
    *,
    project: str | None,
    session_id: str | None,
    time: str | None,
    turn: int | None,
    before: int,
    after: int,
    tz: ZoneInfo,
) -> Timeline:
    """The turns around a point of the chain of the session a caller means
    (`default_session`): turn `turn` of that session, else the newest turn that ended at
    `time` (a time reference as the detail look-up takes), else the chain's newest turn."""
    session = await default_session(db, tenant, project=project, session_id=session_id)
    owners = (await chain_memory(db, session)).kept
    anchor: FoundTurn | None
    if turn is not None:
        origin = session_id if session_id is not None else session.id
        anchor = await TimelineRepository(db).turn_of(owners, origin, turn)
        missing = f"turn {turn} of session {origin!r} is not in this chain"
    elif time is not None:
        found = await turns_at(db, owners, time, tz=tz)
        anchor = found[0] if found else None
        missing = f"no turn of this session's chain ended at {time!r}"
    else:
        newest = await MemoryRepository(db).newest_turns(owners, limit=1, before=None)
        anchor = _found(newest[0]) if newest else None
        missing = f"session {session.id!r} and its chain hold no turn yet"
    if anchor is None:
        raise NotFound(missing)
    older, newer = await TimelineRepository(db).around(owners, anchor, before=before, after=after)
    return Timeline(session.id, older, anchor, newer)


def _found(row: MemoryTurn) -> FoundTurn:
    return FoundTurn(
        row.id or 0,  # a stored row has its id
        row.origin_session_id,
        row.turn,
        row.ended_at,
        row.user_text,
        row.assistant_text,
        row.l1,
    )
