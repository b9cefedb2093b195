"""Claude Code as a client: mirror its sessions from hook posts, hand back memory.

`Stop` / `SubagentStop` carry transcript lines; they are imported into the
mirrored session's log idempotently (by entry uuid / tool_use id, so posting a
whole transcript again changes nothing), in write transactions of a bounded number
of items, and each turn is projected into memory once all its items are in.
`SessionStart` links a new Claude Code session to the latest one of the same project
and answers with the memory block of that chain.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.memory import ChainRepository
from app.db.writer import Work
from app.domain.errors import InvalidInput
from app.domain.items import (
    Origin,
)
from app.memory.transcript import ImportedItem, TranscriptProblem, parse_transcript
from app.services.items import append_item
from app.services.memory import memory_block, project_turns
from app.services.sessions import create_session
from app.services.summaries import enqueue_if_needed
from app.settings import Settings

T = TypeVar("T")

SOURCE = "claude-code"
NEW_SESSION_SOURCES = frozenset({"startup", "clear", "compact", "fork"})


@dataclass
class IngestReport:
    session_id: str
    imported: int = 0
    already_known: int = 0
    problems: list[TranscriptProblem] = field(default_factory=list)


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
    project: str | None,
    parent: Session | None = None,
    link_to_project: bool = False,
) -> Session:
    """The Strata session mirroring a Claude Code session (or subagent), made on first sight."""
    chains = ChainRepository(db)
    existing = await chains.by_external_id(tenant, SOURCE, external_id)
    if existing is not None:
        return existing
    predecessor = None
    if link_to_project and project:
        predecessor = await chains.latest_in_project(tenant, SOURCE, project, exclude="")
    session = await create_session(
        db,
        tenant,
        title=f"Claude Code {external_id}",
        source=SOURCE,
        external_id=external_id,
        project=project,
        continues_from=predecessor.id if predecessor else None,
    )
    if parent is not None:
        session.parent_session_id = parent.id
        db.add(session)
        await db.flush()
    return session


async def ingest_transcript(
    database: UnitsOfWork,
    settings: Settings,
    tenant: str,
    payload: dict[str, Any],
    transcript: str,
    *,
    first_line: int = 1,
) -> IngestReport:
    """Import the transcript's new items in write units of at most
    `settings.import_chunk_items` items each, so that no transcript, however large,
    holds the write lock for longer than one chunk.

    Parsing is pure and runs off the event loop and outside any transaction. Each chunk
    is idempotent on its own (items already in the log are skipped by `source_id`), so a
    failure after some chunks loses nothing and posting the same lines again finishes
    the job. A turn is projected into memory by the chunk that completes it (the next
    turn starts in it) or by the session's last chunk, never half-way; each chunk also
    re-projects the turn that was open when it began, so a retry after a failure finds
    the turn a failed chunk would have completed.
    """
    external_id = _session_id(payload)
    parsed = await asyncio.to_thread(parse_transcript, transcript, first_line=first_line)
    groups: dict[str | None, list[ImportedItem]] = defaultdict(list)
    for item in parsed.items:
        groups[(item.agent_id or "sidechain") if item.sidechain else None].append(item)
    agents = list(groups)
    sessions = await write_mirrored(
        database,
        lambda db: _mirrored_sessions(db, tenant, external_id, payload.get("cwd"), agents),
    )
    report = IngestReport(session_id=sessions[None], problems=parsed.problems)
    size = max(1, settings.import_chunk_items)
    for agent, items in groups.items():
        session_id = sessions[agent]
        fresh = await _not_yet_imported(database, session_id, items)
        chunks = [fresh[i : i + size] for i in range(0, len(fresh), size)] or [[]]
        imported = 0
        for number, chunk in enumerate(chunks, 1):
            imported += await database.write(
                partial(
                    import_chunk,
                    settings=settings,
                    session_id=session_id,
                    items=chunk,
                    last=number == len(chunks),
                )
            )
        report.imported += imported
        report.already_known += len(items) - imported
    return report


async def _mirrored_sessions(
    db: AsyncSession,
    tenant: str,
    external_id: str,
    project: str | None,
    agents: list[str | None],
) -> dict[str | None, str]:
    """The mirrored session of the main thread (key None) and of each subagent thread."""
    main = await mirrored_session(db, tenant, external_id, project=project)
    found: dict[str | None, str] = {None: main.id}
    for agent in agents:
        if agent is not None:  # a subagent's thread is kept apart from the main thread
            child = await mirrored_session(
                db, tenant, f"{external_id}/{agent}", project=main.project, parent=main
            )
            found[agent] = child.id
    return found


async def _not_yet_imported(
    database: UnitsOfWork, session_id: str, items: list[ImportedItem]
) -> list[ImportedItem]:
    """The items whose source id the log does not hold yet, each source id once (a read:
    a retry of a large import writes nothing for what its earlier chunks committed)."""
    async with database.read() as db:
        known = await ItemRepository(db).known_source_ids(session_id, [i.source_id for i in items])
    fresh: list[ImportedItem] = []
    for item in items:
        if item.source_id not in known:
            known.add(item.source_id)
            fresh.append(item)
    return fresh


async def import_chunk(
    db: AsyncSession,
    *,
    settings: Settings,
    session_id: str,
    items: list[ImportedItem],
    last: bool,
) -> int:
    """One write unit of an import: append the items the log does not hold yet (checked
    again here: another post of the same lines may have committed them meanwhile) and
    project the turns that are complete. Returns how many items it appended."""
    # the row lock (PostgreSQL; SQLite's writer is alone anyway) makes a concurrent post of
    # the same lines wait here, and then see what this chunk appended
    session = await db.get(Session, session_id, with_for_update=True, populate_existing=True)
    if session is None:
        raise InvalidInput(f"session {session_id!r} does not exist")
    open_before = session.current_turn
    known = await ItemRepository(db).known_source_ids(session_id, [i.source_id for i in items])
    turns = {open_before} if session.last_seq else set()  # the log's last turn, if any
    open_after = open_before
    imported = 0
    for item in items:
        if item.source_id in known:
            continue
        known.add(item.source_id)
        row = await append_item(
            db, session_id, item.payload, Origin.import_, at=item.at, source_id=item.source_id
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


async def session_start(db: AsyncSession, tenant: str, payload: dict[str, Any]) -> Session:
    """Link the starting session into its project's chain (a write)."""
    source = str(payload.get("source") or "startup")
    return await mirrored_session(
        db,
        tenant,
        _session_id(payload),
        project=payload.get("cwd"),
        link_to_project=source in NEW_SESSION_SOURCES,
    )


async def start_context(db: AsyncSession, settings: Settings, tenant: str, session_id: str) -> str:
    """The memory block a starting session is given (a read)."""
    block = await memory_block(
        db, tenant, session_id, window=settings.memory_l2_window_turns, tz=settings.zone
    )
    return block.text


def _session_id(payload: dict[str, Any]) -> str:
    value = payload.get("session_id")
    if not isinstance(value, str) or not value.strip() or len(value) > 150:
        raise InvalidInput("the hook payload has no usable session_id", field="session_id")
    return value
