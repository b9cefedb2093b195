"""What a session is doing, as a type, read from the statuses of its jobs.

Pure: no I/O, no framework.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from app.domain.jobs import ACTIVE, WAITING

CLAUDE_CODE_SOURCE = "claude-code"  # the source of a session mirrored from Claude Code's hooks


class SessionStatus(StrEnum):
    """`running`: a turn, compaction or piece movement of the session is queued or running;
    `waiting`: none is, and a job of the session waits for a human or for its subtasks;
    `idle`: neither. Background work (memory summaries) never makes a session busy."""

    idle = "idle"
    running = "running"
    waiting = "waiting"


def session_status(job_statuses: Iterable[str]) -> SessionStatus:
    """The status of a session whose session-lane jobs have these statuses."""
    statuses = set(job_statuses)
    if statuses & ACTIVE:
        return SessionStatus.running
    if statuses & WAITING:
        return SessionStatus.waiting
    return SessionStatus.idle
