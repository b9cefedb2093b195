"""Running a piece: movement after movement, until COMPLETE, ASK, ABORT or WAIT_SUBTASKS.

Between movements only the lessons, verify feedback and the task list travel (not
the conversation): each movement starts from its own prompt. The job row keeps the
movement and the state, so a runner that dies is replaced by one that starts the
same movement again, and a job that asked a human resumes at the movement that asked.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.db.types import utcnow
from app.domain.items import Origin, user_text
from app.domain.tasks import TASK_WRITE_TOOLS, render_snapshot
from app.engine.instruction import CommentView, render_enriched_instruction
from app.engine.loop import CANCELLED, TurnConfig, close_dangling_tool_uses, run_turn
from app.engine.pieces import ABORT, ASK, COMPLETE, WAIT_SUBTASKS, Movement, Piece
from app.services.comments import Author, comments_of, post_comment
from app.services.items import append_item
from app.services.jobs import TERMINAL
from app.services.piece_jobs import submit_job, workspace_of
from app.services.tasks import load_store
from app.tools.paths import Workspace
from app.tools.registry import ToolError
from app.tools.transition import SPAWN_SUBTASK, TRANSITION
from app.worker.context_policy import MovementContext
from app.worker.handlers import (
    Deps,
    Outcome,
    context_exhausted,
    job_database,
    problem,
    tool_context,
)
from app.worker.job_session import JobSession
from app.worker.reminder import TaskReminder
from app.worker.turn_store import DbTurnStore, HubTurnEvents

logger = logging.getLogger("strata.pieces")

MUST_TRANSITION = (
    "This step is not over until you call the `transition` tool. Call it now with the "
    "next step, a summary, and lessons."
)


@dataclass
class Transition:
    next_step: str
    summary: str
    lessons: str | None
    forced: bool = False


@dataclass
class PieceState:
    """What a job carries from movement to movement (stored on the job row)."""

    lessons: list[dict[str, str]] = field(default_factory=list)
    feedback: dict[str, list[str]] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, data: dict[str, Any]) -> PieceState:
        return cls(
            lessons=list(data.get("lessons", [])),
            feedback={k: list(v) for k, v in data.get("feedback", {}).items()},
            visited=list(data.get("visited", [])),
            children=list(data.get("children", [])),
        )

    def dump(self) -> dict[str, Any]:
        return {
            "lessons": self.lessons,
            "feedback": self.feedback,
            "visited": self.visited,
            "children": self.children,
        }


def lessons_text(lessons: list[dict[str, str]], limit: int) -> str:
    """The lessons so far, newest kept: the oldest are dropped first to fit `limit`."""
    kept: list[str] = []
    used = 0
    for entry in reversed(lessons):
        line = f"- ({entry['movement']}) {entry['text']}"
        if used + len(line) + 1 > limit:
            if not kept:
                kept.append(line[-limit:])
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(reversed(kept))


class MovementGateway:
    """`transition` and `spawn_subtask` for one movement of one job."""

    def __init__(self, deps: Deps, job: Job, piece: Piece, movement: Movement, state: PieceState):
        self.deps = deps
        self.job = job
        self.piece = piece
        self.movement = movement
        self.state = state
        self.result: Transition | None = None
        self.spawned: list[str] = []

    async def transition(self, next_step: str, summary: str, lessons: str | None) -> str:
        try:
            self.piece.check_step(self.movement, next_step)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc
        if next_step == WAIT_SUBTASKS and not self.spawned:
            raise ToolError("WAIT_SUBTASKS needs at least one spawn_subtask in this step")
        self.result = Transition(next_step, summary, lessons)
        return f"Step {self.movement.name!r} ends; next: {next_step}."

    async def spawn_subtask(self, instruction: str, piece: str | None) -> str:
        name = piece or "default"
        child_piece = self.deps.pieces.get(name)
        if child_piece is None:
            raise ToolError(f"unknown piece {name!r}; known: {sorted(self.deps.pieces.pieces)}")
        child = await job_database(self.deps, self.job).write(
            lambda db: submit_job(
                db, self.job.tenant, instruction=instruction, piece=child_piece, parent=self.job
            )
        )
        self.spawned.append(child.id)
        self.state.children.append(child.id)
        return f"Started subtask {child.id} (piece {name})."


async def run_piece(deps: Deps, job: Job) -> Outcome:
    piece = deps.pieces.get(job.piece)
    if piece is None:
        detail = f"piece {job.piece!r} is not known to this server"
        return Outcome("failed", error=problem("unknown-piece", "Unknown piece", detail))
    state = PieceState.load(job.state)
    movement = piece.movement(job.movement) if job.movement else piece.first
    workspace = workspace_of(deps.settings, job.id)
    workspace.ensure_layout()
    while True:
        await _save(deps, job, movement.name, state)
        step = await run_movement(deps, job, piece, movement, state, workspace)
        if step is None:
            return Outcome("cancelled")
        if isinstance(step, Outcome):
            return step
        _record_lessons(deps, job, movement, step, state, workspace)
        if step.next_step == COMPLETE:
            await _save(deps, job, None, state)
            return Outcome("succeeded", result={"text": step.summary})
        if step.next_step == ABORT:
            await _save(deps, job, movement.name, state)
            return Outcome("aborted", result={"text": step.summary})
        if step.next_step == ASK:
            await _save(deps, job, movement.name, state)
            return Outcome("waiting_human", result={"text": step.summary}, also=_ask(job, step))
        if step.next_step == WAIT_SUBTASKS:
            await _save(deps, job, movement.name, state)
            return Outcome("waiting_subtasks", result={"text": step.summary})
        if step.next_step in state.visited or step.next_step == movement.name:
            state.feedback.setdefault(step.next_step, []).append(step.summary)
        state.visited.append(movement.name)
        movement = piece.movement(step.next_step)


def _ask(job: Job, step: Transition) -> Any:
    async def also(db: Any) -> None:
        await post_comment(db, job, step.summary, Author.agent)

    return also


def _record_lessons(
    deps: Deps,
    job: Job,
    movement: Movement,
    step: Transition,
    state: PieceState,
    workspace: Workspace,
) -> None:
    """COMPLETE without lessons hands on its summary; lessons also go to logs/lessons.jsonl."""
    text = step.lessons or (step.summary if step.next_step == COMPLETE else None)
    if not text:
        return
    state.lessons.append({"movement": movement.name, "text": text})
    entry = {
        "at": utcnow().isoformat(),
        "job_id": job.id,
        "movement": movement.name,
        "next_step": step.next_step,
        "forced": step.forced,
        "lessons": text,
    }
    with (workspace.root / "logs" / "lessons.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry, ensure_ascii=False) + "\n")


async def _save(deps: Deps, job: Job, movement: str | None, state: PieceState) -> None:
    async def save(db: AsyncSession) -> None:
        current = await JobRepository(db).get(job.id)
        if current is None:
            return
        current.movement = movement
        current.state = state.dump()
        current.updated_at = utcnow()
        db.add(current)

    await job_database(deps, job).write(save)
    job.movement = movement
    job.state = state.dump()


async def movement_prompt(
    deps: Deps, job: Job, piece: Piece, movement: Movement, state: PieceState, workspace: Workspace
) -> str:
    settings = deps.settings
    async with deps.database.read() as db:
        comments = await comments_of(db, job.id)
        snapshot = render_snapshot(await load_store(db, job.session_id))
        children = [await JobRepository(db).get(cid) for cid in state.children]
    enriched = render_enriched_instruction(
        instruction=job.instruction or "",
        comments=[CommentView(c.author, c.body, c.created_at) for c in comments],
        input_files=workspace.list_files("input"),
        output_files=workspace.list_files("output"),
        now=utcnow(),
        tz=settings.zone,
        max_comments=settings.job_comments_in_prompt,
        comment_max_chars=settings.job_comment_max_chars,
    )
    parts = [enriched, f"## Step: {movement.name}\n{movement.instruction.strip()}"]
    if state.lessons:
        parts.append(
            "## Lessons from the previous step\n"
            + lessons_text(state.lessons, settings.lessons_max_chars)
        )
    if feedback := state.feedback.get(movement.name):
        parts.append("## Feedback for this step\n" + "\n".join(f"- {f}" for f in feedback))
    finished = [c for c in children if c is not None and c.status in TERMINAL]
    if finished:
        lines = [
            f"- {c.id} ({c.piece}): {c.status}: {(c.result or {}).get('text', '')}"
            for c in finished
        ]
        parts.append("## Subtask outcomes\n" + "\n".join(lines))
    parts.append(f"## Checklist (your task list)\n{snapshot}")
    if movement.ends_on == "transition":
        steps = ", ".join(piece.next_steps(movement))
        parts.append(f"End this step with the `transition` tool; next_step is one of: {steps}.")
    return "\n\n".join(parts)


async def run_movement(
    deps: Deps, job: Job, piece: Piece, movement: Movement, state: PieceState, workspace: Workspace
) -> Transition | Outcome | None:
    """One movement: its prompt, the agent loop, and how it ended (None: cancelled)."""
    prompt = await movement_prompt(deps, job, piece, movement, state, workspace)

    async def begin(db: AsyncSession) -> None:
        if movement.fresh_segment:
            await SessionRepository(db).start_segment(job.session_id)
        await append_item(db, job.session_id, user_text(prompt), Origin.system, job_id=job.id)

    await job_database(deps, job).write(begin)

    gateway = MovementGateway(deps, job, piece, movement, state)
    names = [n for n in movement.allowed_tools if n in deps.tools.names]
    if movement.ends_on == "transition":
        names.append(TRANSITION)
        if WAIT_SUBTASKS in piece.next_steps(movement):
            names.append(SPAWN_SUBTASK)
    held = JobSession(job_database(deps, job), job)
    store = DbTurnStore(held)
    ctx = tool_context(deps, held, piece=gateway, extras={"workspace": workspace})
    reminders = [TaskReminder(deps.settings, store)] if TASK_WRITE_TOOLS & set(names) else []

    def force(ratio: float) -> None:
        if gateway.result is None:
            summary = f"forced: the context reached {ratio:.0%} of the window"
            gateway.result = Transition(piece.forced_step(movement), summary, None, forced=True)

    # one per movement, across its nudges: each threshold fires (and is recorded) once
    context = MovementContext(
        deps.settings,
        job_database(deps, job),
        session_id=job.session_id,
        job_id=job.id,
        movement=movement.name,
        store=store,
        force=force,
    )
    nudges = 0
    while True:
        config = TurnConfig(
            model=deps.settings.model,
            system=None,
            tool_names=list(dict.fromkeys(names)),
            max_iterations=movement.max_iterations,
            max_tokens=deps.settings.llm_max_tokens,
            interceptors=reminders,
            context=context,
        )
        outcome = await run_turn(
            deps.llm, store, deps.tools, ctx, config, HubTurnEvents(deps.hub, job)
        )
        if outcome.status == "cancelled":
            await close_dangling_tool_uses(store, CANCELLED)
            return None
        if gateway.result is not None:
            return gateway.result
        if movement.ends_on == "end_turn" and outcome.status == "completed":
            return Transition(COMPLETE, outcome.final_text, None)
        if outcome.status == "context_exhausted":
            return Outcome("failed", error=context_exhausted(outcome.detail))
        if outcome.status == "max_iterations":
            detail = (
                f"step {movement.name!r} made {outcome.iterations} LLM calls without "
                f"calling transition (max_iterations {movement.max_iterations})"
            )
            return Outcome(
                "failed", error=problem("movement-max-iterations", "Too many iterations", detail)
            )
        nudges += 1
        if nudges > 2:
            return Transition(
                piece.forced_step(movement),
                "forced: the step never called transition",
                None,
                forced=True,
            )
        await store.append(user_text(MUST_TRANSITION), Origin.system)
