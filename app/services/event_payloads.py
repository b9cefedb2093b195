"""The `data` of events that both the streams and the webhooks carry, built in one place so
that one event name means one payload everywhere (`job.status` on a stream and the
`job.<status>` webhooks; `task.updated`, `movement.started` / `movement.ended` and
`turn.interrupted` / `turn.steered` on both)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.db.models import Job, JobAction
from app.domain.tasks import Task


def job_status_data(job: Job, *, error: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "session_id": job.session_id,
        "kind": job.kind,
        "piece": job.piece,
        "status": job.status,
        "turn": job.turn,
        "attempt": job.attempts,
        "parent_job_id": job.parent_job_id,
        "error": error if error is not None else job.error,
    }


def movement_data(job: Job, movement: str, **more: Any) -> dict[str, Any]:
    """`movement.started` (`more`: `number`) and `movement.ended` (`next_step`, `forced`)."""
    return {
        "job_id": job.id,
        "session_id": job.session_id,
        "piece": job.piece,
        "movement": movement,
        "attempt": job.attempts,
        **more,
    }


def turn_data(job: Job, **more: Any) -> dict[str, Any]:
    """`turn.interrupted` and `turn.steered` (`more`: `steer_job_id`, `seq`): the turn is
    the job's."""
    return {"job_id": job.id, "session_id": job.session_id, "turn": job.turn, **more}


def task_updated_data(
    session_id: str, task: Task, *, op: str, origin: str, job_id: str | None
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "taskid": task.taskid,
        "op": op,
        "origin": origin,
        "job_id": job_id,
        "status": task.status,
        "subject": task.subject,
    }


def action_data(action: JobAction) -> dict[str, Any]:
    """An action as events, webhooks and the API show it."""
    rule = None
    if action.layer is not None:
        rule = {"layer": action.layer, "index": action.rule_index, "rule": action.rule}
    return {
        "id": action.id,
        "job_id": action.job_id,
        "session_id": action.session_id,
        "tool_use_id": action.tool_use_id,
        "tool": action.tool,
        "input": action.input,
        "kind": action.kind,
        "rule": rule,
        "status": action.status,
        "decision": action.decision,
        "decided_input": action.decided_input,
        "content": action.content,
        "is_error": action.is_error,
        "reason": action.reason,
        "on_timeout": action.on_timeout,
        "created_at": _iso(action.created_at),
        "expires_at": _iso(action.expires_at),
        "resolved_at": _iso(action.resolved_at),
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")
