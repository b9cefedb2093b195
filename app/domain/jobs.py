"""What a job is, as types: its kind, its status, and where a transition leaves it.

Before this module the statuses were strings compared in half a dozen places and the
kind of a job was guessed from its piece name (a piece called `compact` ran the
compaction handler). Now a job has a `kind`, chosen when it is created and never
derived from a name, and every module asks these sets instead of spelling statuses.

Pure: no I/O, no framework.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


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
