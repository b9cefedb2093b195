"""Full-text search over memory (`app.db.fulltext`): turns' L1/L2 and details' L3, ranked
by the index (SQLite FTS5's bm25, PostgreSQL's `ts_rank`), within a tenant and optionally a
project, a set of sessions and a span of end times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, column, func, literal, literal_column, or_, table
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import MemoryDetail, MemoryTurn, Session
from app.db.repositories.memory import ChainRepository, FoundTurn, Holder, held_by
from app.memory.search import fts5_query, rank_word

_LIKE_ESCAPE = "\\"
PUNCTUATION = "[[:punct:]]+"  # as the index reads it (`app.db.fulltext`)


@dataclass(frozen=True)
class SearchScope:
    """Where to look: a tenant's turns, of these projects (a folder: the sessions filed
    under it, an ancestor of it or a folder inside it), of these holders (a session's
    chain), ended in `[since, until)`."""

    tenant: str
    project: str | None = None
    holders: Sequence[Holder] | None = None
    since: datetime | None = None
    until: datetime | None = None


class TurnMatch(NamedTuple):
    """A turn whose L1 or L2 matched, with its texts."""

    score: float  # higher is better
    origin_session_id: str
    turn: int
    ended_at: datetime
    user_text: str
    assistant_text: str
    l1: str | None


class DetailMatch(NamedTuple):
    """An L3 entry that matched, with its turn."""

    score: float
    origin_session_id: str
    turn: int
    ended_at: datetime
    kind: str
    tool_name: str | None
    text: str


def project_folders(project: str) -> list[str]:
    """The folder and each folder above it (a session is filed under its git root)."""
    folder = project.rstrip("/\\") or project
    found = [folder]
    for separator in ("/", "\\"):
        parts = folder.split(separator)
        found.extend(separator.join(parts[:n]) for n in range(len(parts) - 1, 1, -1))
    return list(dict.fromkeys(found))


def _escape_like(text: str) -> str:
    return text.replace(_LIKE_ESCAPE, _LIKE_ESCAPE * 2).replace("%", r"\%").replace("_", r"\_")


def _scope_conditions(scope: SearchScope) -> tuple[list[Any], dict[str, Any]]:
    conditions: list[Any] = [col(Session.tenant) == bindparam("s_tenant")]
    params: dict[str, Any] = {"s_tenant": scope.tenant}
    if scope.project is not None:
        folders = project_folders(scope.project)
        conditions.append(
            or_(
                col(Session.project).in_(bindparam("s_folders", expanding=True)),
                col(Session.project).like(bindparam("s_inside"), escape=_LIKE_ESCAPE),
            )
        )
        params["s_folders"] = folders
        params["s_inside"] = _escape_like(folders[0]) + "/%"
    if scope.holders is not None:
        conditions.append(held_by(scope.holders))
    if scope.since is not None:
        conditions.append(col(MemoryTurn.ended_at) >= bindparam("s_since", type_=_ENDED))
        params["s_since"] = scope.since
    if scope.until is not None:
        conditions.append(col(MemoryTurn.ended_at) < bindparam("s_until", type_=_ENDED))
        params["s_until"] = scope.until
    return conditions, params


_ENDED = MemoryTurn.__table__.c.ended_at.type  # type: ignore[attr-defined]
_TURN = (
    col(MemoryTurn.origin_session_id),
    col(MemoryTurn.turn),
    col(MemoryTurn.ended_at),
)
_OWNED = col(Session.id) == col(MemoryTurn.session_id)
# SQLite's FTS5 tables (their rowid is the indexed row's id)
_TURNS_FTS = table("memory_turns_fts", column("rowid"))
_DETAILS_FTS = table("memory_details_fts", column("rowid"))


class MemorySearchRepository:
    """Ranking every match of a word most turns hold costs in proportion to the matches, so
    a search ranks the newest `window` matches in its scope (by row id: the order turns
    were stored in), found first by a scan of the index in id order that computes no rank.

    PostgreSQL ranks them by `ts_rank` (how often each row holds the terms). SQLite ranks
    them alike, by how often each text holds each term's longest word (in its first
    `chars` characters), not by FTS5's bm25: bm25 weighs each term by how many rows of the
    whole index hold it, which FTS5 counts anew in every query (~100 ms for a word a
    million turns hold, seconds for such a phrase, whatever the window)."""

    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    @property
    def _postgresql(self) -> bool:
        return bool(self.db.get_bind().dialect.name == "postgresql")

    async def turns(
        self, terms: Sequence[str], scope: SearchScope, limit: int, window: int, chars: int
    ) -> list[TurnMatch]:
        """The best `limit` of the newest `window` turns whose L1 or L2 holds every term,
        best first."""
        rows = await self._ranked(terms, scope, (limit, window, chars), _TURNS)
        return [TurnMatch(float(row[0]), *row[1:]) for row in rows]

    async def details(
        self, terms: Sequence[str], scope: SearchScope, limit: int, window: int, chars: int
    ) -> list[DetailMatch]:
        """The best `limit` of the newest `window` L3 entries holding every term, best first."""
        entry = (col(MemoryDetail.kind), col(MemoryDetail.tool_name))
        rows = await self._ranked(terms, scope, (limit, window, chars), _DETAILS, entry)
        return [DetailMatch(float(row[0]), *row[1:]) for row in rows]

    async def _ranked(
        self,
        terms: Sequence[str],
        scope: SearchScope,
        sizes: tuple[int, int, int],
        index: _Index,
        labels: Sequence[Any] = (),
    ) -> Sequence[Any]:
        if not terms:
            return []
        limit, window, chars = sizes
        conditions, params = _scope_conditions(scope)
        params |= {"s_limit": limit, "s_window": window}
        row_id = index.row_id
        columns = [*labels, *index.texts]
        if self._postgresql:
            tsquery, query_params = _tsquery(terms)
            params |= query_params
            matches: Any = literal_column(f"{index.table}.search").op("@@")(tsquery)
            score: Any = func.ts_rank(literal_column(f"{index.table}.search"), tsquery)
            source: Any = index.model
            ranked_matches: list[Any] = [matches]
        else:
            params["s_match"] = fts5_query(terms)
            fts: Any = literal_column(index.fts.name)
            matches = fts.op("MATCH")(bindparam("s_match"))
            score = _occurrences(terms, index.texts, chars, params)
            source = index.fts
            row_id = index.fts.c.rowid
            ranked_matches = []  # the window's ids matched already
        newest = (
            index.joined(sa_select(row_id.label("id")).select_from(source), source)
            .where(matches, *conditions)
            .order_by(row_id.desc())
            .limit(bindparam("s_window"))
            .cte("newest")
        )
        scored = score.label("score")  # ordered by its label: computed once a row
        ranked = (
            index.joined(sa_select(scored, *_TURN, *columns).select_from(index.model), index.model)
            .where(*ranked_matches, col(index.row_id).in_(sa_select(newest.c.id)))
            .order_by(scored.desc(), col(MemoryTurn.ended_at).desc())
            .limit(bindparam("s_limit"))
        )
        rows: Sequence[Any] = (await self.db.exec(ranked, params=params)).all()
        return rows


def _occurrences(
    terms: Sequence[str], texts: Sequence[Any], chars: int, params: dict[str, Any]
) -> Any:
    """How often the texts hold each term's longest word (`rank_word`), summed: counted as
    the characters `replace` takes out of each text's first `chars` (lower-cased)."""
    params["s_chars"] = chars
    counts: list[Any] = []
    for n, term in enumerate(terms):
        word: Any = bindparam(f"s_word_{n}")
        params[f"s_word_{n}"] = rank_word(term)
        for text in texts:
            cut = func.lower(func.substr(func.coalesce(text, ""), 1, bindparam("s_chars")))
            taken = func.length(cut) - func.length(func.replace(cut, word, ""))
            counts.append(taken / func.length(word))
    total: Any = counts[0]
    for count in counts[1:]:
        total = total + count
    return total


@dataclass(frozen=True)
class _Index:
    """One indexed table: its model, its FTS5 table (SQLite), how a row reaches its turn
    and its session, its indexed texts."""

    table: str
    model: Any
    fts: Any
    row_id: Any
    texts: tuple[Any, ...]

    def joined(self, query: Any, source: Any) -> Any:
        if source is self.fts:
            query = query.join(self.model, self.row_id == self.fts.c.rowid)
        if self.model is MemoryDetail:
            query = query.join(MemoryTurn, col(MemoryTurn.id) == col(MemoryDetail.turn_id))
        return query.join(Session, _OWNED)


_TURNS = _Index(
    "memory_turns",
    MemoryTurn,
    _TURNS_FTS,
    col(MemoryTurn.id),
    (col(MemoryTurn.user_text), col(MemoryTurn.assistant_text), col(MemoryTurn.l1)),
)
_DETAILS = _Index(
    "memory_details", MemoryDetail, _DETAILS_FTS, col(MemoryDetail.id), (col(MemoryDetail.text),)
)


def _tsquery(terms: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """Every term as a phrase (`phraseto_tsquery`, the `simple` configuration), all required,
    its punctuation read as spaces as the indexed text's is."""
    config: Any = literal_column("'simple'::regconfig")
    parts: list[Any] = [
        func.phraseto_tsquery(
            config, func.regexp_replace(bindparam(f"s_term_{n}"), PUNCTUATION, " ", "g")
        )
        for n in range(len(terms))
    ]
    query: Any = parts[0]
    for part in parts[1:]:
        query = query.op("&&")(part)
    return query, {f"s_term_{n}": term for n, term in enumerate(terms)}


_FOUND = (
    col(MemoryTurn.id),
    col(MemoryTurn.origin_session_id),
    col(MemoryTurn.turn),
    col(MemoryTurn.ended_at),
    col(MemoryTurn.user_text),
    col(MemoryTurn.assistant_text),
    col(MemoryTurn.l1),
)


class TimelineRepository:
    """Turns around a point of a chain, and the session a caller means by default."""

    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def turn_of(self, holders: Sequence[Holder], origin: str, turn: int) -> FoundTurn | None:
        """Turn `turn` of session `origin`, if one of `holders` holds it."""
        query: Any = sa_select(*_FOUND).where(
            col(MemoryTurn.origin_session_id) == origin,
            col(MemoryTurn.turn) == turn,
            held_by(holders),
        )
        row = (await self.db.exec(query)).first()
        return FoundTurn(*row) if row is not None else None

    async def around(
        self, holders: Sequence[Holder], anchor: FoundTurn, *, before: int, after: int
    ) -> tuple[list[FoundTurn], list[FoundTurn]]:
        """The `before` turns that ended before the anchor (oldest first) and the `after`
        turns after it (oldest first), in the order of (`ended_at`, `id`)."""
        owned = held_by(holders)
        at, turn_id = anchor.ended_at, anchor.id
        older = or_(
            col(MemoryTurn.ended_at) < at,
            and_(col(MemoryTurn.ended_at) == at, col(MemoryTurn.id) < turn_id),
        )
        newer = or_(
            col(MemoryTurn.ended_at) > at,
            and_(col(MemoryTurn.ended_at) == at, col(MemoryTurn.id) > turn_id),
        )
        earlier: Any = (
            sa_select(*_FOUND)
            .where(owned, older)
            .order_by(col(MemoryTurn.ended_at).desc(), col(MemoryTurn.id).desc())
            .limit(before)
        )
        later: Any = (
            sa_select(*_FOUND)
            .where(owned, newer)
            .order_by(col(MemoryTurn.ended_at), col(MemoryTurn.id))
            .limit(after)
        )
        found_before = [FoundTurn(*row) for row in (await self.db.exec(earlier)).all()]
        found_after = [FoundTurn(*row) for row in (await self.db.exec(later)).all()]
        return found_before[::-1], found_after

    async def newest_tip(
        self, tenant: str, source: str, folders: Sequence[str] | None
    ) -> Session | None:
        """The newest session of `source` of the tenant (of these project folders, when
        given) that ends its chain: what `ChainRepository.latest_in_project` finds, of any
        project when `folders` is None."""
        if folders is not None:
            return await ChainRepository(self.db).latest_in_project(tenant, source, folders)
        later = aliased(Session)
        successor = sa_select(literal(1)).where(
            col(later.continues_from) == col(Session.id), col(later.merged_into).is_(None)
        )
        query = (
            select(Session)
            .where(
                Session.tenant == tenant,
                Session.source == source,
                col(Session.merged_into).is_(None),
                col(Session.parent_session_id).is_(None),
                ~successor.exists(),
            )
            .order_by(col(Session.created_at).desc(), col(Session.id).desc())
            .limit(1)
        )
        return (await self.db.exec(query)).first()
