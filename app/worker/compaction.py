"""Compaction: summarize the current segment and open a new one that keeps every task.

Nothing is written until the summary exists; then the new segment's opening is
written in one transaction. A summary that fails after its retries leaves the
session exactly as it was. The summary request itself fits the context window: its
transcript keeps the newest entries that fit, and its `max_tokens` what is left.

A chat turn compacted before the model answered its user message (its first request
was at the force threshold) carries that message over: the summary covers what came
before it, and the new segment holds it again, word for word, after its opening, so
the request the model answers ends with what the user just said.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.repositories.sessions import SessionRepository
from app.domain.ids import new_id
from app.domain.items import ItemPayload, Origin
from app.domain.tasks import render_snapshot, render_task_list
from app.engine.compaction import carried_input, opening_items, summary_request
from app.engine.context import estimate_request_tokens
from app.engine.llm import LLM, LLMRequest
from app.services.events import record_event
from app.services.items import append_item, segment_payloads
from app.services.sessions import get_session
from app.services.tasks import load_store
from app.settings import Settings
from app.worker.llm_retry import ask_for_text


class CompactionFailed(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def compact_session(
    *,
    settings: Settings,
    database: UnitsOfWork,
    llm: LLM,
    tenant: str,
    session_id: str,
    job_id: str | None,
    turn: int | None,
    offers_task_list: bool,
    window_tokens: int | None = None,
    turn_input: ItemPayload | None = None,
) -> int:
    """Compact the session's current segment; returns the new segment number.

    `offers_task_list`: whether the session's requests define the `TaskList` tool; only
    then (and only with tasks) does the new segment open with a `TaskList` call.
    `window_tokens`: the window the summary request is held to, when the API said it is
    smaller than the setting.
    `turn_input`: the user message of the chat turn that compacts; while nothing the
    model said follows it, it is carried over (see the module)."""
    async with database.read() as db:
        session = await get_session(db, tenant, session_id)
        segment = await segment_payloads(db, session_id, session.current_segment, session.lineage)
        store = await load_store(db, session_id, session.lineage)
        snapshot = render_snapshot(store, settings.task_snapshot_max_chars)
    items, carried = carried_input(segment, turn_input)
    request = fitted_summary_request(settings, items, snapshot, window_tokens)
    summary = await ask_for_text(
        settings, llm, request, clean=str.strip, what=f"compaction summary of {session_id}"
    )
    if summary is None:
        await database.write(
            lambda db: record_event(
                db,
                session_id,
                "compaction.failed",
                {"segment": session.current_segment},
                job_id=job_id,
            )
        )
        raise CompactionFailed(
            f"the summary model failed {settings.summary_retries + 1} times; "
            "the session is unchanged"
        )

    async def open_segment(db: AsyncSession) -> int:
        sessions = SessionRepository(db)
        locked = await sessions.lock(session_id)
        lineage = locked.lineage if locked is not None else None
        store = await load_store(db, session_id, lineage)  # tasks may have changed meanwhile
        segment = await sessions.start_segment(session_id)
        budget = settings.task_snapshot_max_chars
        listed = render_task_list(store, budget) if offers_task_list and store.all() else None
        snapshot = render_snapshot(store, budget)
        opening = opening_items(summary, snapshot, listed, new_id("toolu_strata"))
        for payload in opening:
            await append_item(db, session_id, payload, Origin.system, turn=turn, job_id=job_id)
        if carried is not None:
            await append_item(db, session_id, carried, Origin.user, turn=turn, job_id=job_id)
        await record_event(
            db,
            session_id,
            "session.compacted",
            {"segment": segment, "summarized_items": len(items), "tasks": len(store.all())},
            job_id=job_id,
        )
        return segment

    return await database.write(open_segment)


def fitted_summary_request(
    settings: Settings, items: list[ItemPayload], snapshot: str, window_tokens: int | None = None
) -> LLMRequest:
    """The summary request, under the exhausted threshold of the window (`window_tokens`,
    else the setting), with room for the answer: at most `llm_max_tokens`, and never more
    than the window has left."""
    window = window_tokens or settings.context_window_tokens
    answer = min(settings.llm_max_tokens, max(1, window // 4))
    request = summary_request(
        items,
        snapshot,
        model=settings.summary_model,
        max_tokens=answer,
        item_max_chars=settings.compaction_item_max_chars,
        max_input_tokens=int(window * settings.context_exhausted_ratio) - answer,
    )
    request.max_tokens = max(1, min(answer, window - estimate_request_tokens(request)))
    return request
