"""The ids a log line concerns: the request, the session, the job.

Context variables, so they follow each request and each job run through every await
(asyncio copies the context into the tasks it creates) and any module's logger picks them
up without passing them around.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

request_id: ContextVar[str | None] = ContextVar("strata_request_id", default=None)
session_id: ContextVar[str | None] = ContextVar("strata_session_id", default=None)
job_id: ContextVar[str | None] = ContextVar("strata_job_id", default=None)


@contextmanager
def bound(
    *, request: str | None = None, session: str | None = None, job: str | None = None
) -> Iterator[None]:
    """Within the block, log lines carry these ids (the ones not given stay as they are)."""
    tokens = [
        (var, var.set(value))
        for var, value in ((request_id, request), (session_id, session), (job_id, job))
        if value is not None
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
