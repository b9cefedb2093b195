"""Claude Code as a client: mirror its sessions from hook posts, hand back memory.

`Stop` / `SubagentStop` carry transcript lines; they are imported into the
mirrored session's log idempotently (by entry uuid / tool_use id, so posting a
whole transcript again changes nothing), then the touched turns are projected
into memory. `SessionStart` links a new Claude Code session to the latest one of
the same project and answers with the memory block of that chain.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.memory import ChainRepository
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

SOURCE = "claude-code"
NEW_SESSION_SOURCES = frozenset({"startup", "clear", "compact", "fork"})


@dataclass
class IngestReport:
    session_id: str
    imported: int = 0
    already_known: int = 0
    problems: list[TranscriptProblem] = field(default_factory=list)


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


async def _import(
    db: AsyncSession, session: Session, items: list[ImportedItem]
) -> tuple[int, set[int]]:
    known = await ItemRepository(db).known_source_ids(session.id, [i.source_id for i in items])
    turns: set[int] = set()
    imported = 0
    for item in items:
        if item.source_id in known:
            continue
        known.add(item.source_id)
        row = await append_item(
            db, session.id, item.payload, Origin.import_, at=item.at, source_id=item.source_id
        )
        turns.add(row.turn)
        imported += 1
    return imported, turns


async def ingest_transcript(
    db: AsyncSession,
    settings: Settings,
    tenant: str,
    payload: dict[str, Any],
    transcript: str,
    *,
    first_line: int = 1,
) -> IngestReport:
    external_id = _session_id(payload)
    main = await mirrored_session(db, tenant, external_id, project=payload.get("cwd"))
    parsed = parse_transcript(transcript, first_line=first_line)
    groups: dict[str | None, list[ImportedItem]] = defaultdict(list)
    for item in parsed.items:
        groups[(item.agent_id or "sidechain") if item.sidechain else None].append(item)
    report = IngestReport(session_id=main.id, problems=parsed.problems)
    for agent, items in groups.items():
        target = main
        if agent is not None:  # a subagent's thread is kept apart from the main thread
            target = await mirrored_session(
                db, tenant, f"{external_id}/{agent}", project=main.project, parent=main
            )
        imported, turns = await _import(db, target, items)
        report.imported += imported
        report.already_known += len(items) - imported
        await project_turns(db, target.id, turns)
        await enqueue_if_needed(db, target, settings.memory_l2_window_turns)
    return report


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
