"""Claude Code as a client: mirror its sessions from hook posts, hand back memory.

`Stop` / `SubagentStop` carry transcript lines; they are imported into the
mirrored session's log idempotently (by entry uuid / tool_use id, so posting a
whole transcript again changes nothing), in write transactions of a bounded number
of items, and each turn is projected into memory once all its items are in.
A Claude Code session first seen by any hook continues the newest session of its project
that nothing continues yet, so one missed SessionStart breaks no chain; `SessionStart`
answers with the memory block of that chain. Items for a session merged away land in
the session it was merged into.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.memory import ChainRepository
from app.db.repositories.rows import RowRepository
from app.db.writer import Work
from app.domain.errors import InvalidInput
from app.domain.items import (
    Origin,
)
from app.domain.sessions import CLAUDE_CODE_SOURCE
from app.memory.render import DetailHint
from app.memory.transcript import (
    ImportedItem,
    TranscriptProblem,
    iter_transcript,
    transcript_facts,
)
from app.services.items import append_item
from app.services.memory import BlockLimits, memory_block, project_turns, resolve
from app.services.sessions import create_session
from app.services.summaries import enqueue_if_needed
from app.settings import Settings

T = TypeVar("T")

SOURCE = CLAUDE_CODE_SOURCE


@dataclass(frozen=True)
class HookSource:
    """Which Claude Code session a hook post is about, and the folders naming its project:
    `cwd`, and the git root of it when the kit sent one (`project_root`)."""

    session_id: str
    cwd: str | None = None
    project_root: str | None = None


@dataclass
class IngestReport:
    session_id: str
    imported: int = 0
    already_known: int = 0
    problems: list[TranscriptProblem] = field(default_factory=list)


@dataclass(frozen=True)
class Mirror:
    """Where a Claude Code thread's items go: the session they are imported into (the one
    mirroring it, or the session it was merged into since), and every session that may
    already hold some of them (both of those), for idempotent imports."""

    session_id: str
    holders: tuple[str, ...]


def project_keys(source: HookSource) -> list[str]:
    """The folders naming a hook's project: the git root of `cwd` when the kit sent it
    (`project_root`: sessions started in different folders of one repository share a
    chain), and `cwd` itself. The first one is what a new session is filed under."""
    keys = [source.project_root, source.cwd]
    return [k for k in dict.fromkeys(keys) if k is not None and k.strip()]


async def write_mirrored(database: UnitsOfWork, work: Work[T]) -> T:
    """Run a unit that finds or makes mirrored sessions. Two hook posts of one Claude Code
    session at once may both make it; the one that loses on the unique key runs again
    and finds the other's."""
    try:
        return await database.write(work)
    except IntegrityError:
        return await database.write(work)


async def mirrored_session(
    db: AsyncSession,
    tenant: str,
    external_id: str,
    *,
    projects: list[str],
    parent: Session | None = None,
) -> Session:
    """The Strata session mirroring a Claude Code session (or subagent), made on first sight.

    Whatever hook first shows a session (SessionStart of any source, Stop, SubagentStop),
    a new main-thread session continues the newest session of its project that nothing
    continues yet: a SessionStart that never reached Strata (server down, `claude --resume`
    of a session from before the hooks were installed, hooks installed mid-session) leaves
    no gap in the chain, and a late SessionStart finds the session and links nothing again.
    """
    chains = ChainRepository(db)
    existing = await chains.by_external_id(tenant, SOURCE, external_id)
    if existing is not None:
        return existing
    predecessor = None
    if parent is None and projects:
        predecessor = await chains.latest_in_project(tenant, SOURCE, projects)
    session = await create_session(
        db,
        tenant,
        title=f"Claude Code {external_id}",
        source=SOURCE,
        external_id=external_id,
        project=projects[0] if projects else None,
        continues_from=predecessor.id if predecessor else None,
    )
    if parent is not None:
        session.parent_session_id = parent.id
        await RowRepository(db).save(session)
    return session


async def _mirror(db: AsyncSession, tenant: str, session: Session) -> Mirror:
    """Items of a session merged away land in the session it was merged into."""
    target = await resolve(db, tenant, session.id)
    return Mirror(target.id, tuple(dict.fromkeys((target.id, session.id))))


Lines = Callable[[], Iterator[str]]
"""A transcript's lines, read afresh on every call (an import reads them twice)."""


async def ingest_transcript(
    database: UnitsOfWork,
    settings: Settings,
    tenant: str,
    source: HookSource,
    lines: Lines,
    *,
    first_line: int = 1,
) -> IngestReport:
    """Import the transcript's new items in write units of at most
    `settings.import_chunk_items` items each, so that no transcript, however large,
    holds the write lock for longer than one chunk.

    The lines are read twice, a batch at a time, off the event loop and outside any
    transaction: once for what an item depends on beyond its line (the usage of an API
    message written over several lines), once for the items, which are written as they
    come; what is held at once is a chunk per thread (the main one, each subagent's)
    and the source ids met. Each chunk is idempotent on its own (items already in the
    log are skipped by `source_id`), so a failure after some chunks loses nothing and
    posting the same lines again finishes the job. A turn is projected into memory by
    the chunk that completes it (the next turn starts in it) or by the thread's last
    chunk, never half-way; each chunk also re-projects the turn that was open when it
    began, so a retry after a failure finds the turn a failed chunk would have completed.
    """
    external_id = _session_id(source)
    facts = await asyncio.to_thread(lambda: transcript_facts(lines()))
    projects = project_keys(source) or ([facts.cwd] if facts.cwd else [])
    mirrors = await write_mirrored(
        database,
        partial(
            _mirrored_sessions, tenant=tenant, external_id=external_id, projects=projects, agents=[]
        ),
    )
    report = IngestReport(session_id=mirrors[None].session_id)
    size = max(1, settings.import_chunk_items)
    threads: dict[str | None, _ThreadImport] = {}
    found = iter_transcript(lines(), facts, first_line=first_line)
    while batch := await asyncio.to_thread(lambda: list(islice(found, size))):
        for item in batch:
            if isinstance(item, TranscriptProblem):
                report.problems.append(item)
                continue
            agent = (item.agent_id or "sidechain") if item.sidechain else None
            thread = threads.get(agent)
            if thread is None:
                if agent not in mirrors:
                    mirrors |= await write_mirrored(
                        database,
                        partial(
                            _mirrored_sessions,
                            tenant=tenant,
                            external_id=external_id,
                            projects=projects,
                            agents=[agent],
                        ),
                    )
                thread = threads[agent] = _ThreadImport(database, settings, mirrors[agent], size)
            await thread.add(item)
    for thread in threads.values():
        await thread.finish()
        report.imported += thread.imported
        report.already_known += thread.items - thread.imported
    return report


@dataclass
class _ThreadImport:
    """The import of one thread's items (the main one, or a subagent's), as they come:
    each unchecked batch is checked against the log in one read, and the fresh items are
    written `size` at a time, the last chunk (which completes the thread) at the end."""

    database: UnitsOfWork
    settings: Settings
    mirror: Mirror
    size: int
    items: int = 0
    imported: int = 0
    seen: set[str] = field(default_factory=set)
    unchecked: list[ImportedItem] = field(default_factory=list)
    fresh: list[ImportedItem] = field(default_factory=list)

    async def add(self, item: ImportedItem) -> None:
        self.items += 1
        if item.source_id in self.seen:  # each source id once
            return
        self.seen.add(item.source_id)
        self.unchecked.append(item)
        if len(self.unchecked) < self.size:
            return
        await self._check()
        while len(self.fresh) > self.size:  # a chunk with more after it: not the last
            await self._write(self.fresh[: self.size], last=False)
            del self.fresh[: self.size]

    async def finish(self) -> None:
        await self._check()
        chunks = [self.fresh[i : i + self.size] for i in range(0, len(self.fresh), self.size)]
        for number, chunk in enumerate(chunks or [[]], 1):
            await self._write(chunk, last=number == max(1, len(chunks)))
        self.fresh = []

    async def _check(self) -> None:
        """Keep the items whose source id no holder's log has yet (a read: a retry of a
        large import writes nothing for what its earlier chunks committed)."""
        if not self.unchecked:
            return
        async with self.database.read() as db:
            known = await _known(db, self.mirror, [i.source_id for i in self.unchecked])
        self.fresh.extend(i for i in self.unchecked if i.source_id not in known)
        self.unchecked = []

    async def _write(self, chunk: list[ImportedItem], *, last: bool) -> None:
        self.imported += await self.database.write(
            partial(
                import_chunk, settings=self.settings, mirror=self.mirror, items=chunk, last=last
            )
        )


async def _mirrored_sessions(
    db: AsyncSession,
    *,
    tenant: str,
    external_id: str,
    projects: list[str],
    agents: list[str | None],
) -> dict[str | None, Mirror]:
    """Where the main thread's items (key None) and each subagent thread's go."""
    main = await mirrored_session(db, tenant, external_id, projects=projects)
    found: dict[str | None, Mirror] = {None: await _mirror(db, tenant, main)}
    for agent in agents:
        if agent is not None:  # a subagent's thread is kept apart from the main thread
            child = await mirrored_session(
                db,
                tenant,
                f"{external_id}/{agent}",
                projects=[main.project] if main.project else [],
                parent=main,
            )
            found[agent] = await _mirror(db, tenant, child)
    return found


async def _known(db: AsyncSession, mirror: Mirror, source_ids: list[str]) -> set[str]:
    items = ItemRepository(db)
    known: set[str] = set()
    for holder in mirror.holders:
        known |= await items.known_source_ids(holder, source_ids)
    return known


async def import_chunk(
    db: AsyncSession,
    *,
    settings: Settings,
    mirror: Mirror,
    items: list[ImportedItem],
    last: bool,
) -> int:
    """One write unit of an import: append the items the log does not hold yet (checked
    again here: another post of the same lines may have committed them meanwhile) and
    project the turns that are complete. Returns how many items it appended."""
    # the row lock (PostgreSQL; SQLite's writer is alone anyway) makes a concurrent post of
    # the same lines wait here, and then see what this chunk appended
    session_id = mirror.session_id
    session = await RowRepository(db).by_id(Session, session_id, locked=True)
    if session is None:
        raise InvalidInput(f"session {session_id!r} does not exist")
    open_before = session.current_turn
    known = await _known(db, mirror, [i.source_id for i in items])
    turns = {open_before} if session.last_seq else set()  # the log's last turn, if any
    open_after = open_before
    imported = 0
    for item in items:
        if item.source_id in known:
            continue
        known.add(item.source_id)
        row = await append_item(
            db,
            session_id,
            item.payload,
            Origin.import_,
            at=item.at,
            source_id=item.source_id,
            joins_turn=item.joins_turn,
        )
        turns.add(row.turn)
        open_after = row.turn
        imported += 1
    if not last:  # more items of the open turn may follow in the next chunk
        turns.discard(open_after)
    await project_turns(db, session_id, turns)
    if last:
        await enqueue_if_needed(db, session, settings.memory_l2_window_turns)
    return imported


async def session_start(db: AsyncSession, tenant: str, source: HookSource) -> Session:
    """Find or make the starting session, linked into its project's chain (a write); a
    session merged away answers through the one it was merged into."""
    session = await mirrored_session(db, tenant, _session_id(source), projects=project_keys(source))
    return await resolve(db, tenant, session.id)


async def start_context(
    db: AsyncSession,
    settings: Settings,
    tenant: str,
    session_id: str,
    hint: DetailHint = DetailHint.sc_detail,
) -> str:
    """The memory block a starting session is given (a read), its guide line naming `hint`."""
    limits = BlockLimits.of(settings)
    block = await memory_block(db, tenant, session_id, limits=limits, tz=settings.zone, hint=hint)
    return block.text


def _session_id(source: HookSource) -> str:
    value = source.session_id
    if not value.strip() or len(value) > 150:
        raise InvalidInput("the hook payload has no usable session_id", field="session_id")
    return value
