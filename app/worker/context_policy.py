"""The context manager in a running job: what happens before each request, per kind.

Both policies estimate each outbound request from memory (the last answered request's
usage plus the characters added since, `app.engine.context`), so the check costs no
database round trip. They differ in what they do when the window fills:

* **chat**: at the force threshold, or with more images and documents than a request
  carries (STRATA_REQUEST_MEDIA_MAX_COUNT / _BYTES), the segment is compacted *before* the
  request is sent, and the request is built again from the new segment;
* **movements** (seed 004): a `context.<action>` event for each threshold crossed, the
  wrap-up message at 85%, the forced transition at 95% — each once per movement. A
  movement whose first request (its own prompt, before any answer) is at the force
  threshold fails with `context-exhausted`: moving on cannot shrink it, and forcing
  transition after transition would only run the job up to its `max_movements`.

Neither ever sends a request at or over the exhausted threshold (99%): if compaction
could not bring it under, the turn ends with `context-exhausted` instead of looping.
Both set the one tool-result budget each response's calls share.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.domain.items import user_text
from app.engine.context import (
    BLOCK_OVERHEAD_CHARS,
    Check,
    ContextAction,
    ContextManager,
    RequestSizer,
    Thresholds,
    WindowLimit,
    blocks_chars,
)
from app.engine.llm import LLMRequest, LLMResponse
from app.engine.loop import REBUILD, SEND, STOP, ContextVerdict, Note, TurnStore
from app.engine.media import media_load
from app.engine.truncation import ResponseBudget, result_budget
from app.services.events import record_event
from app.settings import Settings
from app.worker.compaction import CompactionFailed

logger = logging.getLogger("strata.context")

WRAP_UP = (
    "Your context is {percent}% full. Wrap up this step now: finish what is essential "
    "and call `transition` with a summary and the lessons the next step needs."
)


def manager_of(settings: Settings, window_tokens: int | None = None) -> ContextManager:
    return ContextManager(
        window_tokens or settings.context_window_tokens,
        Thresholds(
            warn=settings.context_warn_ratio,
            prompt=settings.context_prompt_ratio,
            force=settings.context_force_ratio,
            exhausted=settings.context_exhausted_ratio,
        ),
    )


def exhausted_detail(check: Check, window: int, limit: float, why: str) -> str:
    return (
        f"the next request would hold about {check.tokens} of the {window} tokens of the "
        f"context window ({check.ratio:.0%}); requests at {limit:.0%} or more are never "
        f"sent, and {why}"
    )


class _Measured:
    """What both policies share: the manager, the size of the request in flight, the
    tool-result budget of its response, and the window the API said it has (`window`,
    the process's: what one job learns holds for the others)."""

    def __init__(self, settings: Settings, window: WindowLimit | None = None) -> None:
        self.settings = settings
        self.window = window or WindowLimit(settings.context_window_tokens)
        self.manager = manager_of(settings, self.window.tokens)
        self._sized: tuple[LLMRequest, int] | None = None
        self._sizer = RequestSizer()

    def size(self, request: LLMRequest) -> int:
        if self._sized is not None and self._sized[0] is request:
            return self._sized[1]
        chars = self._sizer.chars(request)
        self._sized = (request, chars)
        return chars

    def send(self, request: LLMRequest, check: Check) -> ContextVerdict:
        """Send it, asking for no more output than the window has left: the API refuses a
        request whose input and `max_tokens` together exceed the window."""
        room = self.manager.window_tokens - check.tokens
        request.max_tokens = max(1, min(request.max_tokens, room))
        return SEND

    def refused(self, request: LLMRequest, tokens: int, window: int) -> None:
        if window < self.window.tokens:
            logger.warning(
                "the API refused a request as %s tokens over its window of %s tokens, "
                "less than STRATA_CONTEXT_WINDOW_TOKENS (%s): requests are held to %s",
                tokens,
                window,
                self.settings.context_window_tokens,
                window,
            )
        self.window.learn(window)
        self.manager.refused(self.size(request), tokens, window)

    def answered(self, request: LLMRequest, response: LLMResponse) -> ResponseBudget:
        chars = self.size(request)
        self.manager.answered(chars, response.usage.context_tokens or None)
        # the next request holds this one and the answer; the results share what is left
        grown = chars + BLOCK_OVERHEAD_CHARS + blocks_chars(response.content)
        settings = self.settings
        total = result_budget(
            self.manager.available_tokens(grown),
            ratio=settings.tool_result_budget_ratio,
            cap=settings.tool_result_max_tokens,
            floor=settings.tool_result_min_tokens,
        )
        return ResponseBudget(total_tokens=total, floor_tokens=settings.tool_result_min_tokens)


class ChatContext(_Measured):
    """Chat: compact at the force threshold before sending; never send at 99%."""

    def __init__(
        self,
        settings: Settings,
        compact: Callable[[], Awaitable[object]],
        window: WindowLimit | None = None,
    ) -> None:
        super().__init__(settings, window)
        self._compact = compact
        self._just_compacted = False
        # compaction left a request at the force threshold (a huge system prompt): it
        # cannot help this turn, so it is not tried before every request again
        self._compaction_futile = False

    def _media_over_budget(self, request: LLMRequest) -> bool:
        """The request carries more images and documents than one may: a new segment
        leaves the older ones behind, where a placeholder for each would change the
        segment's prefix under the prompt cache."""
        count, size = media_load(request.messages)
        settings = self.settings
        return count > settings.request_media_max_count or size > settings.request_media_max_bytes

    async def before_request(self, request: LLMRequest) -> ContextVerdict:
        check = self.manager.check(self.size(request))
        at_force = self.manager.at_force(check.ratio) or self._media_over_budget(request)
        why = "compaction did not make it small enough"
        if self._just_compacted:
            self._just_compacted = False
            self._compaction_futile = at_force
        elif at_force and not self._compaction_futile:
            try:
                await self._compact()
            except CompactionFailed as exc:  # the request may still go if it fits
                logger.warning("automatic compaction failed: %s", exc.detail)
                why = f"compaction failed: {exc.detail}"
            else:
                self.manager.restart()  # a new segment: measured afresh
                self._just_compacted = True
                return REBUILD
        if self.manager.too_full(check.ratio):
            limit = self.manager.thresholds.exhausted
            return ContextVerdict(
                "exhausted",
                exhausted_detail(check, self.manager.window_tokens, limit, why),
            )
        return self.send(request, check)


class MovementContext(_Measured):
    """A movement (seed 004): events, the wrap-up message, the forced transition."""

    def __init__(
        self,
        settings: Settings,
        database: UnitsOfWork,
        *,
        session_id: str,
        job_id: str,
        movement: str,
        store: TurnStore,
        force: Callable[[float], None],
        fired: Iterable[str] = (),
        remember: Callable[[AsyncSession, tuple[ContextAction, ...]], Awaitable[None]]
        | None = None,
        window: WindowLimit | None = None,
    ) -> None:
        super().__init__(settings, window)
        # a resumed movement: what fired before the crash does not fire again, and what
        # fires now is remembered (by `remember`) in the transaction of its events
        self.manager.already_fired(fired)
        self._remember = remember
        self.database = database
        self.session_id = session_id
        self.job_id = job_id
        self.movement = movement
        self.store = store
        self._force = force
        # whether the model has answered in this movement (across its nudges): before
        # that, the request is the movement's own prompt, and forcing a transition cannot
        # make it smaller (steps that cannot start would be forced on up to max_movements)
        self._has_answer = False

    def answered(self, request: LLMRequest, response: LLMResponse) -> ResponseBudget:
        self._has_answer = True
        return super().answered(request, response)

    async def before_request(self, request: LLMRequest) -> ContextVerdict:
        check = self.manager.check(self.size(request))
        if check.crossed:
            await self._record(check)
        if self.manager.at_force(check.ratio) and not self._has_answer:
            thresholds = self.manager.thresholds
            limit = thresholds.exhausted if self.manager.too_full(check.ratio) else thresholds.force
            why = (
                f"it is the first request of step {self.movement!r} (its prompt, before any "
                "answer), which a forced transition to another step cannot make smaller"
            )
            return ContextVerdict(
                "exhausted", exhausted_detail(check, self.manager.window_tokens, limit, why)
            )
        if self.manager.at_force(check.ratio):
            self._force(check.ratio)
            return STOP
        if "prompt" in check.crossed:
            note = WRAP_UP.format(percent=int(check.ratio * 100))
            await self.store.record(Note(user_text(note)))
            return REBUILD
        return self.send(request, check)

    async def _record(self, check: Check) -> None:
        """One write for the events of every threshold this request crossed."""
        data = {"job_id": self.job_id, "movement": self.movement, "ratio": round(check.ratio, 4)}

        async def write(db: AsyncSession) -> None:
            for action in check.crossed:
                await record_event(
                    db, self.session_id, f"context.{action}", data, job_id=self.job_id
                )
            if self._remember is not None:
                await self._remember(db, check.crossed)

        await self.database.write(write)
