"""What a movement starts from: a system prompt and one user prompt (seed 004).

The system prompt is the piece's `system`, else the session's own prompt, else Strata's
default for jobs. The user prompt is the enriched instruction (time, last comments, file
lists, the task), then the movement's instruction and what travels between movements:
how the previous movement was forced on when it was, lessons, feedback sent back to
this movement, subtask outcomes, checklists, the git excerpt a verify movement left,
the task list, and the next steps open. Every part that can grow is capped by a setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.db.models import Job, Session
from app.db.repositories.jobs import JobRepository
from app.db.repositories.rows import RowRepository
from app.db.types import utcnow
from app.domain.jobs import TERMINAL
from app.domain.tasks import render_snapshot
from app.engine.instruction import CommentView, render_enriched_instruction
from app.engine.pieces import Movement, Piece
from app.engine.workspace import Workspace
from app.services.comments import comments_of
from app.services.piece_jobs import workspace_of
from app.services.tasks import load_store
from app.worker.handlers import Deps
from app.worker.piece_state import PieceState, lessons_text
from app.worker.workspace_notes import SUBTASKS, checklists_text, mount_subtask_outputs

DEFAULT_JOB_SYSTEM = (
    "You are Strata's agent, working on one step of a job. The job's files are in its "
    "workspace: input/ holds what the user gave you, output/ is where your results go. "
    "Use only the tools you are offered, keep the task list current, and end the step "
    "with the `transition` tool: the step is not over, and the job not done, until you "
    "call it."
)
_OUTCOME_MAX_CHARS = 500


@dataclass(frozen=True)
class MovementStart:
    system: str
    prompt: str


def system_prompt(piece: Piece, session: Session | None) -> str:
    return piece.system or (session.system_prompt if session else None) or DEFAULT_JOB_SYSTEM


def _outcome_line(child: Job) -> str:
    text = (child.result or {}).get("text", "") or ""
    if len(text) > _OUTCOME_MAX_CHARS:
        text = text[:_OUTCOME_MAX_CHARS] + f"… [cut: {len(text) - _OUTCOME_MAX_CHARS} more]"
    files = f" (its output/ is in {SUBTASKS}/{child.id}/)" if child.status in TERMINAL else ""
    return f"- {child.id} ({child.piece}): {child.status}: {text}{files}"


def outcomes_text(children: list[Job], max_chars: int) -> str:
    """One line per finished subtask, in the order given, as many as fit in `max_chars`
    (one at least), then a line counting the rest: a fan-out of hundreds of subtasks
    would otherwise fill the window of the movement that waited for them."""
    lines: list[str] = []
    used = 0
    for child in children:
        line = _outcome_line(child)
        if lines and used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    if more := len(children) - len(lines):
        lines.append(f"…{more} more: their outputs are in {SUBTASKS}/")
    return "\n".join(lines)


async def movement_start(
    deps: Deps, job: Job, piece: Piece, movement: Movement, state: PieceState, workspace: Workspace
) -> MovementStart:
    settings = deps.settings
    async with deps.database.read() as db:
        session = await RowRepository(db).by_id(Session, job.session_id)
        comments = await comments_of(db, job.id)
        store = await load_store(db, job.session_id, session.lineage if session else None)
        snapshot = render_snapshot(store, settings.task_snapshot_max_chars)
        children = await JobRepository(db).children(job.id)
    finished = [c for c in children if c.status in TERMINAL]
    await mount_subtask_outputs(workspace, [workspace_of(settings, c.id) for c in finished])
    enriched = render_enriched_instruction(
        instruction=job.instruction or "",
        comments=[CommentView(c.author, c.body, c.created_at) for c in comments],
        input_files=workspace.list_files("input"),
        output_files=workspace.list_files("output"),
        now=utcnow(),
        tz=settings.zone,
        max_comments=settings.job_comments_in_prompt,
        comment_max_chars=settings.job_comment_max_chars,
        max_files=settings.job_files_in_prompt,
    )
    parts = [enriched, f"## Step: {movement.name}\n{movement.instruction.strip()}"]
    if state.forced:
        parts.append(f"## The previous step was forced on\n{state.forced}")
    if state.lessons:
        text = lessons_text(state.lessons, settings.lessons_max_chars)
        parts.append(f"## Lessons from the previous step\n{text}")
    if feedback := state.feedback.get(movement.name):
        text = lessons_text(feedback, settings.feedback_max_chars)
        parts.append(f"## Feedback for this step\n{text}")
    if finished:
        text = outcomes_text(finished, settings.subtask_outcomes_max_chars)
        parts.append(f"## Subtask outcomes\n{text}")
    if checklists := checklists_text(workspace, settings.checklists_max_chars):
        parts.append(f"## Checklists\n{checklists}")
    if state.git_excerpt:
        parts.append(f"## Workspace changes (git)\n{state.git_excerpt}")
    parts.append(f"## Checklist (your task list)\n{snapshot}")
    steps = ", ".join(piece.next_steps(movement))
    parts.append(f"End this step with the `transition` tool; next_step is one of: {steps}.")
    return MovementStart(system_prompt(piece, session), "\n\n".join(parts))
