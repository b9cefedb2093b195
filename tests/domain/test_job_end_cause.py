"""Why a job that did not succeed ended, from its status and its error."""

from __future__ import annotations

import pytest

from app.domain.errors import PROBLEM_PREFIX
from app.domain.jobs import EndCause, JobStatus, end_cause


def _error(slug: str) -> dict[str, str]:
    return {"type": PROBLEM_PREFIX + slug, "title": "t", "detail": "d"}


@pytest.mark.parametrize(
    ("status", "error", "cause"),
    [
        (JobStatus.cancelled, _error("llm-timeout"), EndCause.cancelled),
        (JobStatus.failed, None, EndCause.unexplained),
        (JobStatus.aborted, {}, EndCause.unexplained),
        (JobStatus.failed, _error("llm-not-configured"), EndCause.llm_not_configured),
        (JobStatus.failed, _error("context-exhausted"), EndCause.session_state),
        (JobStatus.failed, _error("agent-max-iterations"), EndCause.session_state),
        (JobStatus.failed, _error("llm-overloaded"), EndCause.upstream),
        (JobStatus.failed, _error("compaction-failed"), EndCause.upstream),
        (JobStatus.failed, _error("tool-crashed"), EndCause.internal),
    ],
)
def test_end_cause_names_why_a_job_ended(
    status: JobStatus, error: dict[str, str] | None, cause: EndCause
) -> None:
    assert end_cause(status, error) is cause
