"""L1 summaries, worked off in the background.

The `summary` job of a chain asks the summary model for an L1 line of every turn
older than the newest L2 window (`app.services.summaries` says which); it works off
the whole backlog (after a merge it can be large) with bounded concurrency. A
summary that fails after its retries stores the L2 text itself as L1, marked as a
fallback: no information is lost.
"""

from __future__ import annotations

import asyncio
import math

from app.db.engine import UnitsOfWork
from app.db.models import Job, MemoryTurn, Session
from app.db.repositories.memory import MemoryRepository
from app.db.repositories.rows import RowRepository
from app.engine.context import DEFAULT_CHARS_PER_TOKEN, estimate_request_tokens
from app.engine.llm import LLM, LLMRequest
from app.memory.l1 import L1_SYSTEM, l1_request, l2_text, one_line, target_chars
from app.services.summaries import pending_turns
from app.settings import Settings
from app.worker.llm_retry import ask_for_text


async def summarize_backlog(settings: Settings, database: UnitsOfWork, llm: LLM, job: Job) -> int:
    """Summarize every pending turn of the job's chain; returns how many were written.

    The backlog is read again after each round: turns that left the window while
    the round ran are worked off by this job too, not left for the next one.
    """
    gate = asyncio.Semaphore(max(1, settings.summary_concurrency))

    async def one(turn: MemoryTurn) -> None:
        async with gate:
            text, fallback = await summarize_turn(settings, llm, turn)
            assert turn.id is not None
            turn_id = turn.id
            await database.write(
                lambda db: MemoryRepository(db).set_l1(turn_id, text, fallback=fallback)
            )

    written = 0
    while True:
        async with database.read() as db:
            session = await RowRepository(db).by_id(Session, job.session_id)
            if session is None:
                return written
            pending = await pending_turns(db, session, settings.memory_l2_window_turns)
        if not pending:
            return written
        await asyncio.gather(*(one(t) for t in pending))
        written += len(pending)


L1_PROMPT_CHARS = 400  # the instruction around the turn's text, and the framing


def fitted_l1_request(settings: Settings, l2: str) -> LLMRequest:
    """The L1 request for `l2`, under the exhausted threshold of the window with room for
    the answer: the text of a huge turn is cut (its summary covers what fits). The answer
    may take `summary_max_tokens_per_char` tokens per character of the summary's target
    length, so the request reserves what a summary line needs, not a chat answer's."""
    window = settings.context_window_tokens
    wanted = math.ceil(
        target_chars(l2, settings.summary_target_ratio) * settings.summary_max_tokens_per_char
    )
    answer = min(settings.llm_max_tokens, max(1, window // 4), max(1, wanted))
    room = int((window * settings.context_exhausted_ratio - answer) * DEFAULT_CHARS_PER_TOKEN)
    limit = max(0, room - len(L1_SYSTEM) - L1_PROMPT_CHARS)
    if len(l2) > limit:
        l2 = l2[:limit]
    request = l1_request(
        l2, model=settings.summary_model, ratio=settings.summary_target_ratio, max_tokens=answer
    )
    request.max_tokens = max(1, min(answer, window - estimate_request_tokens(request)))
    return request


async def summarize_turn(settings: Settings, llm: LLM, turn: MemoryTurn) -> tuple[str, bool]:
    """(summary, fell_back): the summary model's line (`ask_for_text`), else the L2 text.

    A turn with no L2 at all (only tool calls or harness messages) is never sent to the
    summary model: its L1 is empty, which the memory block shows as nothing."""
    l2 = l2_text(turn.user_text, turn.assistant_text)
    if not l2.strip():
        return "", False
    request = fitted_l1_request(settings, l2)
    summary = await ask_for_text(
        settings, llm, request, clean=one_line, what=f"L1 of turn {turn.id}"
    )
    if summary is None:
        return l2, True
    return summary, False
