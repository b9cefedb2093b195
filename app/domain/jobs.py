"""What a job is, as types: its kind, its status, where a transition leaves it, and
why a job that did not succeed ended.

A job's `kind` is chosen when it is created and never derived from a piece name; every
module asks these enums and sets instead of spelling statuses.

Pure: no I/O, no framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from app.domain.errors import PROBLEM_PREFIX


class JobKind(StrEnum):
    """Which handler runs the job. Only `piece` jobs name a piece."""

    chat = "chat"
    compaction = "compaction"
    summary = "summary"
    piece = "piece"


class JobStatus(StrEnum):
    draft = "draft"
    queued = "queued"
    running = "running"
    waiting_human = "waiting_human"
    waiting_subtasks = "waiting_subtasks"
    succeeded = "succeeded"
    failed = "failed"
    aborted = "aborted"
    cancelled = "cancelled"


TERMINAL: Final = frozenset(
    {JobStatus.succeeded, JobStatus.failed, JobStatus.aborted, JobStatus.cancelled}
)
"""A job in one of these has ended for good."""

WAITING: Final = frozenset({JobStatus.waiting_human, JobStatus.waiting_subtasks})
"""Parked until something outside the job happens (a comment, its children ending)."""

ACTIVE: Final = frozenset({JobStatus.queued, JobStatus.running})
"""Holding (or about to hold) its session's lane."""

# The special next steps of a transition and the status each leaves the job in.
COMPLETE, ASK, ABORT, WAIT_SUBTASKS = "COMPLETE", "ASK", "ABORT", "WAIT_SUBTASKS"
STEP_STATUS: Final = {
    COMPLETE: JobStatus.succeeded,
    ASK: JobStatus.waiting_human,
    ABORT: JobStatus.aborted,
    WAIT_SUBTASKS: JobStatus.waiting_subtasks,
}
SPECIAL_STEPS: Final = frozenset(STEP_STATUS)

RESERVED_PIECE_NAMES: Final = frozenset({*(kind.value for kind in JobKind), "compact", "summarize"})
"""Names no piece file may take: the internal kinds (and their former piece names), so a
piece can never be mistaken for, or stand in for, an internal handler."""


def status_after(step: str) -> JobStatus | None:
    """The status a model-called transition to `step` leaves the job in; None when the
    step is another movement (the job keeps running)."""
    return STEP_STATUS.get(step)


def is_terminal(status: str) -> bool:
    return status in TERMINAL


class EndCause(StrEnum):
    """Why a job that did not succeed ended, from its status and its `error`."""

    cancelled = "cancelled"
    """Cancelled before it ended."""
    unexplained = "unexplained"
    """Ended without an error that names its cause."""
    llm_not_configured = "llm_not_configured"
    """No LLM is configured: the server's state."""
    session_state = "session_state"
    """The session's state stopped it: its context cannot hold another request even after
    compaction, or the turn reached STRATA_AGENT_MAX_ITERATIONS. Retrying as is fails the
    same way; a compaction, a shorter system prompt, a new message or a new session helps."""
    upstream = "upstream"
    """The LLM failed (the summary model of a compaction included)."""
    internal = "internal"
    """Anything else: the server's fault."""


INTERRUPTED: Final = "interrupted"
"""The problem type slug of a job the user interrupted (`interrupted_error`)."""


def interrupted_error() -> dict[str, Any]:
    """The `error` of a job that ended `cancelled` because the user interrupted its turn."""
    return {
        "type": PROBLEM_PREFIX + INTERRUPTED,
        "title": "Interrupted",
        "detail": "the user interrupted the turn; calls it left open were answered as such",
    }


_SESSION_STATE_SLUGS: Final = frozenset({"context-exhausted", "agent-max-iterations"})


def end_cause(status: JobStatus, error: Mapping[str, Any] | None) -> EndCause:
    """Why a job with `status` and `error` (a problem: `type`, `title`, `detail`) ended."""
    if status == JobStatus.cancelled:
        return EndCause.cancelled
    slug = str((error or {}).get("type", "")).removeprefix(PROBLEM_PREFIX)
    if not slug:
        return EndCause.unexplained
    if slug == "llm-not-configured":
        return EndCause.llm_not_configured
    if slug in _SESSION_STATE_SLUGS:
        return EndCause.session_state
    if slug.startswith("llm-") or slug == "compaction-failed":
        return EndCause.upstream
    return EndCause.internal
