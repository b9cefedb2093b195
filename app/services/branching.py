"""Fork and rewind: a session that reads another's log up to a point, and a session that
goes back to an earlier point of its own, neither copying nor removing an item.

Both are written as the session's lineage (`app.domain.lineage`): which ranges of which
logs it reads, and what the segment it continues is made of. A fork is a new row; a
rewind is a `rewind` item and a new segment. Every reader of a session's log (its
segment for a request, its task replay, `/items`) reads through the lineage, so the
model, the task list and the API see the same log. A point is a `seq`; `to_seq` names
the log as it was when it ended there (a reverted item's too: an undo is a rewind to
the end before the last rewind).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches
from app.db.caches import SESSION_VIEWS
from app.db.engine import UnitsOfWork
from app.db.models import Session
from app.db.repositories.items import ItemRepository
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.errors import Conflict, InvalidInput
from app.domain.ids import new_id
from app.domain.items import (
    DocumentBlock,
    ImageBlock,
    ItemPayload,
    Origin,
    Rewind,
    ToolResult,
    UserMessage,
    load_payload,
)
from app.domain.lineage import Lineage, Part, Span, forked, lineage_of, segment_parts
from app.domain.tasks import Task
from app.engine.requests import unanswered_tool_uses
from app.engine.snapshots import Changes
from app.services import tasks as task_log
from app.services import webhooks
from app.services.events import record_event
from app.services.items import add_item
from app.services.sessions import get_session
from app.services.workspace_snapshots import changes_at, put_back, restore, snapshot_at
from app.settings import Settings

FIRST_SEGMENT = 1
"""A fork's first segment: its own items start it, after the parts of its parent's."""


@dataclass(frozen=True)
class Point:
    """A place in a session's log: its log as it was when it ended at `seq`."""

    seq: int
    turn: int
    parts: tuple[Part, ...]


# --- where a point is ---------------------------------------------------------------
async def _lineage(db: AsyncSession, session: Session) -> Lineage:
    return lineage_of(session.id, session.lineage)


async def resolve_seq(
    db: AsyncSession,
    session: Session,
    lineage: Lineage,
    *,
    at_seq: int | None = None,
    at_turn: int | None = None,
    before_turn: int | None = None,
    field: str,
) -> int:
    """The `seq` that one of `at_seq` (the log as it ended there), `at_turn` (the end of
    that turn) or `before_turn` (just before that turn's user message) names."""
    given = [v for v in (at_seq, at_turn, before_turn) if v is not None]
    if len(given) != 1:
        raise InvalidInput(f"give exactly one point ({field})", field=field)
    if at_seq is not None:
        if not 0 <= at_seq <= session.last_seq:
            raise InvalidInput(
                f"seq {at_seq} is not in the session's log (0..{session.last_seq})", field=field
            )
        return at_seq
    turn = at_turn if at_turn is not None else before_turn
    assert turn is not None
    bounds = await _turn_bounds(db, lineage, turn)
    if bounds is None:
        if at_turn == 0:
            return 0
        raise InvalidInput(f"turn {turn} is not in the session's log", field=field)
    first, last = bounds
    return last if at_turn is not None else first - 1


async def _turn_bounds(db: AsyncSession, lineage: Lineage, turn: int) -> tuple[int, int] | None:
    """The first and last `seq` of `turn` in the log the session reads now."""
    repo = ItemRepository(db)
    found: list[tuple[int, int]] = []
    for span in lineage.spans:
        bounds = await repo.turn_bounds(span.source, turn, after_seq=span.after, upto=span.upto)
        if bounds is not None:
            found.append(bounds)
    if not found:
        return None
    return min(f for f, _ in found), max(last for _, last in found)


async def point_at(db: AsyncSession, session: Session, lineage: Lineage, seq: int) -> Point:
    """The point `seq` of the session's log; 422 when it falls between a `tool_use` and
    its results (the conversation would end on calls without answers), naming the
    nearest points that do not."""
    if seq == 0:
        return Point(0, 0, ())
    source = lineage.source_of(seq)
    repo = ItemRepository(db)
    item = await repo.at_seq(source, seq) if source is not None else None
    if source is None or item is None:
        raise InvalidInput(f"seq {seq} is not in the session's log", field="seq")
    await _outside_tool_call(db, source, item.turn, seq)
    if source == session.id:
        of_source = lineage
    else:
        stored = await SessionRepository(db).lineage(source)
        of_source = lineage_of(source, stored)
    parts = segment_parts(of_source, source, item.segment, seq)
    return Point(seq, item.turn, tuple(parts))


async def _outside_tool_call(db: AsyncSession, source: str, turn: int, seq: int) -> None:
    rows = await ItemRepository(db).of_turns(source, [turn])
    before = [row for row in rows if row.seq <= seq]
    payloads: list[ItemPayload] = [load_payload(row.kind, row.payload) for row in before]
    open_calls = unanswered_tool_uses(payloads)
    if not open_calls:
        return
    ids = {call.id for call in open_calls}
    asked = max(
        row.seq
        for row, payload in zip(before, payloads, strict=True)
        if payload.kind == "assistant_message"
    )
    answered = [
        row.seq
        for row in rows
        if row.seq > seq and row.kind == "tool_result" and row.payload.get("tool_use_id") in ids
    ]
    nearest = [asked - 1]
    if len(answered) >= len(ids):
        nearest.append(max(answered))
    raise InvalidInput(
        f"seq {seq} is inside a tool call (between its tool_use at seq {asked} and its "
        f"results); the nearest points outside it are {nearest}",
        field="seq",
        reason="inside-tool-call",
        nearest=nearest,
    )


# --- fork ---------------------------------------------------------------------------
async def fork_session(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    *,
    at_seq: int | None = None,
    at_turn: int | None = None,
    before_turn: int | None = None,
    title: str | None = None,
) -> Session:
    """A new session reading `session_id`'s log up to the point, and its own after it:
    nothing is copied, so a fork costs the same however long the log."""
    parent = await get_session(db, tenant, session_id)
    lineage = await _lineage(db, parent)
    seq = await resolve_seq(
        db,
        parent,
        lineage,
        at_seq=at_seq,
        at_turn=at_turn,
        before_turn=before_turn,
        field="at_seq",
    )
    if seq == parent.last_seq and await JobRepository(db).session_is_busy(parent.id):
        raise Conflict(
            "the session has a turn queued or running: fork it at an earlier point, or "
            "when the turn has ended",
            reason="session-busy",
        )
    point = await point_at(db, parent, lineage, seq)
    child_id = new_id("ses")
    spans = lineage.spans_at(seq)
    child = Session(
        id=child_id,
        tenant=tenant,
        title=title if title is not None else parent.title,
        system_prompt=parent.system_prompt,
        model=parent.model,
        metadata_=dict(parent.metadata_),
        tools=parent.tools,
        mcp=parent.mcp,
        tool_policy=parent.tool_policy,
        client_tools=parent.client_tools,
        project=parent.project,
        continues_from=parent.continues_from,  # the same memory block as its parent's
        forked_from=parent.id,
        fork_seq=seq,
        last_seq=seq,
        current_turn=point.turn,
        current_segment=FIRST_SEGMENT,
        lineage=forked(child_id, spans, seq, FIRST_SEGMENT, point.parts).to_json(),
    )
    child = await SessionRepository(db).save(child)
    data = {
        "session_id": parent.id,
        "job_id": None,
        "forked_session_id": child.id,
        "at_seq": seq,
        "turn": point.turn,
    }
    await record_event(db, parent.id, "session.forked", data)
    await webhooks.enqueue_event(db, tenant, "session.forked", data)
    return child


# --- rewind -------------------------------------------------------------------------
@dataclass(frozen=True)
class RewindPreview:
    to_seq: int
    from_seq: int
    reverted_turns: list[int]
    restored_turns: list[int]
    tasks_before: list[Task]
    tasks_after: list[Task]
    files: list[str]
    workspace: WorkspaceChanges | None = None


@dataclass(frozen=True)
class WorkspaceChanges:
    """What a rewind with `files: true` does (or would do) to a job's workspace: restore
    it to the snapshot taken at `snapshot_seq`."""

    job_id: str
    snapshot_seq: int
    changes: Changes


@dataclass(frozen=True)
class Rewound:
    seq: int
    to_seq: int
    from_seq: int
    segment: int
    workspace: WorkspaceChanges | None = None


async def _target(
    db: AsyncSession, session: Session, to_seq: int | None, to_turn: int | None
) -> tuple[Lineage, Point]:
    lineage = await _lineage(db, session)
    seq = await resolve_seq(db, session, lineage, at_seq=to_seq, at_turn=to_turn, field="to_seq")
    return lineage, await point_at(db, session, lineage, seq)


async def _refuse_busy(db: AsyncSession, session_id: str) -> None:
    if await JobRepository(db).session_is_busy(session_id):
        raise Conflict(
            "the session has a turn queued or running: wait for it, or interrupt it first "
            "(or send with ?if_busy=rollback)",
            reason="session-busy",
        )


async def rewind_session(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    *,
    to_seq: int | None = None,
    to_turn: int | None = None,
    check_busy: bool = True,
) -> Rewound:
    """Append a `rewind` item and read the log as it was at the point from now on."""
    session = await get_session(db, tenant, session_id, lock=True)
    if check_busy:
        await _refuse_busy(db, session_id)
    lineage, point = await _target(db, session, to_seq, to_turn)
    return await _rewind_to(db, tenant, session, lineage, point)


async def rewind_with_files(
    database: UnitsOfWork,
    settings: Settings,
    tenant: str,
    session_id: str,
    *,
    to_seq: int | None = None,
    to_turn: int | None = None,
) -> Rewound:
    """`rewind_session` that also restores the session's job workspace to its snapshot
    at the point, after a safety snapshot of it as the log ends now (a rewind back to
    that end with files undoes both).

    The files are copied outside any transaction (a write unit only talks to the
    database); the rewind is then written only if the log did not move meanwhile, and
    otherwise (or when that write fails) the folder is put back from the safety snapshot
    and the answer is a 409."""
    async with database.read() as db:
        session = await get_session(db, tenant, session_id)
        await _refuse_busy(db, session_id)
        _, point = await _target(db, session, to_seq, to_turn)
        found = await snapshot_at(db, settings, tenant, session_id, point.seq)
    head = session.last_seq
    restored = await restore(found, session_id, head)

    async def write(db: AsyncSession) -> Rewound:
        now = await get_session(db, tenant, session_id, lock=True)
        if now.last_seq != head:
            raise Conflict(
                "the session's log moved while its workspace was restored: nothing was "
                "rewound and the workspace was put back; try again",
                reason="session-busy",
            )
        await _refuse_busy(db, session_id)
        lineage = await _lineage(db, now)
        return await _rewind_to(db, tenant, now, lineage, point, files=True)

    try:
        done = await database.write(write)
    except BaseException:
        await put_back(found, restored)
        raise
    changes = WorkspaceChanges(found.ref.job_id, found.ref.seq, restored.changes)
    return replace(done, workspace=changes)


async def rewind_before_seq(db: AsyncSession, tenant: str, session_id: str, seq: int) -> None:
    """A rollback's rewind, as the turn that replaces the rolled back one starts: back
    to just before that turn's user message at `seq` (a turn's boundary). A log whose
    item before it is inside a tool call (broken before the turn began) is left as it
    is: the turn that replaces it must still start."""
    session = await get_session(db, tenant, session_id, lock=True)
    lineage = await _lineage(db, session)
    if not lineage.reads(seq):  # rewound already
        return
    try:
        point = await point_at(db, session, lineage, seq - 1)
    except InvalidInput:
        return
    await _rewind_to(db, tenant, session, lineage, point)


async def _rewind_to(
    db: AsyncSession,
    tenant: str,
    session: Session,
    lineage: Lineage,
    point: Point,
    *,
    files: bool = False,
) -> Rewound:
    sessions = SessionRepository(db)
    from_seq = session.last_seq
    segment = await sessions.start_segment(session.id)
    slot = await sessions.allocate_seq(session.id, new_turn=False)
    rewound = lineage.rewound(session.id, point.seq, slot.seq, segment, point.parts)
    await sessions.set_lineage(session.id, rewound.to_json(), segment=segment)
    payload = Rewind(to_seq=point.seq, from_seq=from_seq, files=files)
    await add_item(db, session.id, slot, payload, Origin.api)
    caches.take(db, SESSION_VIEWS, session.id)  # this process's view: read anew
    data = {
        "session_id": session.id,
        "job_id": None,
        "seq": slot.seq,
        "to_seq": point.seq,
        "from_seq": from_seq,
        "segment": segment,
        "files": files,
    }
    await record_event(db, session.id, "session.rewound", data)
    await webhooks.enqueue_event(db, tenant, "session.rewound", data)
    return Rewound(slot.seq, point.seq, from_seq, segment)


async def rewind_preview(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    *,
    to_seq: int | None = None,
    to_turn: int | None = None,
    files: Settings | None = None,
) -> RewindPreview:
    """What `rewind_session` would change, changing nothing: the turns it would revert
    and bring back, the task list before and after, the files the reverted items attach,
    and with `files` (as for a rewind) what it would do to the job's workspace."""
    session = await get_session(db, tenant, session_id)
    lineage, point = await _target(db, session, to_seq, to_turn)
    after = lineage.spans_at(point.seq)
    now = list(lineage.spans)
    turns_now, files_gone = await _turns_and_files(db, now, leaving_out=after)
    turns_after, _ = await _turns_and_files(db, after, leaving_out=now)
    before_store = await task_log.replay_spans(db, now)
    after_store = await task_log.replay_spans(db, after)
    workspace = None
    if files is not None:
        found, changes = await changes_at(db, files, tenant, session_id, point.seq)
        workspace = WorkspaceChanges(found.ref.job_id, found.ref.seq, changes)
    return RewindPreview(
        to_seq=point.seq,
        from_seq=session.last_seq,
        reverted_turns=turns_now,
        restored_turns=turns_after,
        tasks_before=before_store.all(),
        tasks_after=after_store.all(),
        files=files_gone,
        workspace=workspace,
    )


async def _turns_and_files(
    db: AsyncSession, spans: list[Span], *, leaving_out: list[Span]
) -> tuple[list[int], list[str]]:
    """The turns of the items `spans` hold and `leaving_out` does not, and the files
    their user messages and tool results attach."""
    repo = ItemRepository(db)
    turns: set[int] = set()
    files: dict[str, None] = {}
    for span in spans:
        for row in await repo.span_page(
            span.source, after_seq=span.after, upto=span.upto, limit=_NO_LIMIT
        ):
            if any(other.source == span.source and other.holds(row.seq) for other in leaving_out):
                continue
            if row.kind == "rewind":
                continue
            turns.add(row.turn)
            for file_id in _attached(row.kind, row.payload):
                files[file_id] = None
    return sorted(turns), list(files)


_NO_LIMIT = 2**31 - 1


def _attached(kind: str, data: dict[str, Any]) -> list[str]:
    if kind not in ("user_message", "tool_result"):
        return []
    payload = load_payload(kind, data)
    content = payload.content if isinstance(payload, UserMessage | ToolResult) else []
    if isinstance(content, str):
        return []
    return [
        block.file.file_id
        for block in content
        if isinstance(block, ImageBlock | DocumentBlock) and block.file is not None
    ]
