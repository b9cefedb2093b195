"""One movement of a piece job: begin it (or pick it up from the log), run the agent
loop, and say how it ended.

A movement begins in one transaction: a segment of the job's own is opened (the chat's
is remembered, to be given back when the job stops running), the prompt is appended,
the job's state records the movement as open and a `movement.started` event goes out. A
runner that resumes a job whose movement is open continues it from the log: the loop
gives a tool call left without a result the `interrupted` result and goes on from there,
never from the prompt again (and no second `movement.started`).

Tool calls go past the tool policy of the movement, compiled once at its start: the
operator's rules, the tenant's, the session's and the movement's own (`tool_policy` in the
piece file). A call the policy `ask`s, and a call of one of the job's client tools, holds
the movement: its job waits for people (`waiting_human`) with one action per held call,
written in the transaction of that move, and the chat's segment is given back while it
waits; once the last action is resolved the job is queued again, takes the movement's
segment back and answers the held calls as people decided (`app.engine.loop`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job, Session
from app.db.repositories.jobs import JobRepository
from app.db.repositories.rows import RowRepository
from app.db.repositories.sessions import SessionRepository, peek_turn_start
from app.db.types import utcnow
from app.domain.errors import SubtaskLimit
from app.domain.items import Origin, user_text
from app.domain.jobs import WAIT_SUBTASKS, JobStatus
from app.engine.context import ContextAction
from app.engine.llm import ToolSpec
from app.engine.loop import (
    CANCELLED,
    INTERRUPTED_BY_USER,
    Note,
    TurnConfig,
    TurnOutcome,
    close_dangling_tool_uses,
    run_turn,
)
from app.engine.pieces import Movement, Piece
from app.engine.tools import ToolError
from app.engine.workspace import Workspace
from app.mcp.names import is_mcp_name
from app.mcp.pool import McpPool
from app.services import webhooks, workspace_snapshots
from app.services.actions import Asked, open_actions
from app.services.items import append_item
from app.services.piece_jobs import submit_subtask
from app.services.sessions import session_from
from app.tools.transition import SPAWN_SUBTASK, TRANSITION
from app.worker.context_policy import MovementContext
from app.worker.handlers import (
    Deps,
    Outcome,
    context_exhausted,
    job_database,
    problem,
    tool_context,
    turn_approvals,
)
from app.worker.job_session import JobSession
from app.worker.mcp_tools import TurnMcp, job_attachments, turn_mcp
from app.worker.piece_prompt import MovementStart, movement_start, system_prompt
from app.worker.piece_state import OpenMovement, PieceState
from app.worker.reminder import task_reminder
from app.worker.turn_store import DbTurnStore, HubTurnEvents

MUST_TRANSITION = (
    "This step is not over until you call the `transition` tool. Call it now with the "
    "next step, a summary, and lessons."
)
NUDGES = 2


@dataclass
class Transition:
    next_step: str
    summary: str
    lessons: str | None
    # not called by the model: the context ran out, or the model never called transition
    forced: bool = False


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
            known = ", ".join(sorted(self.deps.pieces.pieces))
            raise ToolError(f"unknown piece {name!r}; a subtask runs one of: {known}")
        state = self.state

        async def spawn(db: AsyncSession) -> Job:
            # a cancel commits before or after this, never between the check and the child:
            # before, no child; after, the cancel finds the child and cancels it too
            parent = await JobRepository(db).locked(self.job.id)
            if parent is None or parent.cancel_requested:
                raise ToolError("the job is being cancelled; no subtask is started")
            try:
                child = await submit_subtask(
                    db, self.deps.settings, parent, instruction=instruction, piece=child_piece
                )
            except SubtaskLimit as exc:
                raise ToolError(f"no subtask is started: {exc.detail}") from exc
            # the child is recorded as ours in the same transaction that makes it, so a
            # cancel or a resume always knows it
            state.children.append(child.id)
            await _store_state(db, self.job, state)
            return child

        child = await job_database(self.deps, self.job).write(spawn)
        self.spawned.append(child.id)
        return f"Started subtask {child.id} (piece {name})."


async def _store_state(db: AsyncSession, job: Job, state: PieceState) -> None:
    current = await JobRepository(db).get(job.id)
    if current is None:
        return
    current.state = state.dump()
    current.updated_at = utcnow()
    await JobRepository(db).save(current)
    job.state = current.state


@dataclass(frozen=True)
class TreeBudget:
    """The movements a job's whole tree may begin: its root's, counted on the root's row."""

    root_id: str
    limit: int


class _TreeBudgetSpent(Exception):
    """Raised inside the opening transaction, so that nothing of it is written."""

    def __init__(self, taken: int) -> None:
        super().__init__(f"the job tree has begun {taken} movements")
        self.taken = taken


def _tree_spent(job: Job, movement: Movement, tree: TreeBudget) -> Outcome:
    detail = (
        f"the job tree of {tree.root_id} has begun {tree.limit} movements, the most its root "
        f"allows (max_movements {tree.limit}, shared by all its subtasks); job {job.id} "
        f"stops before step {movement.name!r}"
    )
    error = problem("max-movements", "Too many movements", detail)
    return Outcome(JobStatus.aborted, error=error, result={"text": detail})


async def begin(
    deps: Deps,
    job: Job,
    piece: Piece,
    movement: Movement,
    state: PieceState,
    workspace: Workspace,
    tree: TreeBudget,
) -> MovementStart | Outcome:
    """Open the movement (see the module docstring), or find it open in the log (then the
    prompt returned is empty: it is in the log already). A movement begun counts against
    the budget of the job's tree; the job is aborted (the Outcome) when that is spent."""
    if state.open is not None and state.open.movement == movement.name:
        async with deps.database.read() as db:
            session = await RowRepository(db).by_id(Session, job.session_id)
        if session is not None and session.current_segment != state.open.segment:
            # it waited for people on tool calls, the chat's segment given back meanwhile
            await job_database(deps, job).write(lambda db: _take_back(db, job, state))
        if session is not None:
            return MovementStart(system_prompt(piece, session), "")
    async with deps.database.read() as db:  # the log's end the workspace is taken at
        row = await RowRepository(db).by_id(Session, job.session_id)
    head = row.last_seq if row is not None else 0
    await workspace_snapshots.at_movement_start(deps.settings, job, head)
    start = await movement_start(deps, job, piece, movement, state, workspace)

    async def open_it(db: AsyncSession) -> None:
        # first, so a spent budget leaves nothing of the opening written, here or in `state`
        if await JobRepository(db).take_tree_movement(tree.root_id, tree.limit) is None:
            raise _TreeBudgetSpent(tree.limit)
        sessions = SessionRepository(db)
        if state.chat_segment is None:
            state.chat_segment = await sessions.current_segment(job.session_id)
        if movement.fresh_segment or state.last_segment is None:
            segment = await sessions.start_segment(job.session_id)
        else:
            segment = state.last_segment
            await sessions.set_segment(job.session_id, segment)
        await append_item(db, job.session_id, user_text(start.prompt), Origin.system, job_id=job.id)
        state.open = OpenMovement(movement.name, segment)
        state.last_segment = segment
        state.movements_run += 1
        current_job = await JobRepository(db).get(job.id)
        if current_job is not None:
            current_job.movement = movement.name
        await _store_state(db, job, state)
        job.movement = movement.name
        await webhooks.movement_event(
            db, job, "movement.started", movement.name, number=state.movements_run
        )

    try:
        await job_database(deps, job).write(open_it)
    except _TreeBudgetSpent:
        return _tree_spent(job, movement, tree)
    return start


async def _take_back(db: AsyncSession, job: Job, state: PieceState) -> None:
    """The open movement's segment made the session's current again, the chat's kept to
    be given back when the job stops running."""
    assert state.open is not None
    sessions = SessionRepository(db)
    state.chat_segment = await sessions.current_segment(job.session_id)
    await sessions.set_segment(job.session_id, state.open.segment)
    await _store_state(db, job, state)


async def _movement_mcp(
    deps: Deps, job: Job, session: Session, movement: Movement, pool: McpPool | None
) -> TurnMcp:
    """The MCP tools of the movement: the job's and the movement's own servers, and the
    session's that its `allowed_tools` names."""
    own = [*job_attachments(job), *movement.mcp_attachments()]
    if pool is None or not (own or any(is_mcp_name(name) for name in movement.allowed_tools)):
        return TurnMcp(deps.tools, [])
    return await turn_mcp(
        deps.settings,
        deps.database,
        deps.hub,
        deps.tools,
        job,
        session,
        pool=pool,
        allowed=movement.allowed_tools,
        own=own,
    )


def _tool_names(deps: Deps, piece: Piece, movement: Movement) -> list[str]:
    names = [n for n in movement.allowed_tools if n in deps.tools.names]
    names.append(TRANSITION)
    if WAIT_SUBTASKS in piece.next_steps(movement):
        names.append(SPAWN_SUBTASK)
    return list(dict.fromkeys(names))


async def run_movement(
    deps: Deps,
    job: Job,
    piece: Piece,
    movement: Movement,
    state: PieceState,
    workspace: Workspace,
    tree: TreeBudget,
    pool: McpPool | None = None,
) -> Transition | Outcome | None:
    """One movement: its start, the agent loop, and how it ended (None: cancelled).
    `pool`: the job's MCP connections, for the session's MCP servers' tools that the
    movement's `allowed_tools` names by glob (`mcp__git__*`)."""
    start = await begin(deps, job, piece, movement, state, workspace, tree)
    if isinstance(start, Outcome):
        return start
    gateway = MovementGateway(deps, job, piece, movement, state)
    # the session's row and its tenant's rules, read once for the tools and the policy
    rows, tenant_rules = await peek_turn_start(deps.database, job.session_id)
    session = session_from(rows, job.tenant, job.session_id)
    mcp = await _movement_mcp(deps, job, session, movement, pool)
    names = [*_tool_names(deps, piece, movement), *mcp.names]
    held = JobSession(
        job_database(deps, job), job, checkpoint_every=deps.settings.task_checkpoint_ops
    )
    client_tools = [ToolSpec.model_validate(tool) for tool in job.input.get("client_tools") or ()]
    approvals = turn_approvals(
        deps,
        job,
        session,
        tenant_rules,
        mcp,
        [spec.name for spec in client_tools],
        movement.policy_rules(),
    )
    offered = bool(mcp.tools.specs(names)) or bool(client_tools)
    conversation = held.view.conversation(tools_offered=offered)
    store = DbTurnStore(held)
    ctx = tool_context(deps, held, piece=gateway, workspace=workspace)
    config = TurnConfig(
        model=deps.settings.model,
        system=start.system,
        tool_names=names,
        max_iterations=movement.max_iterations,
        max_tokens=deps.settings.llm_max_tokens,
        # one per movement, across its nudges and a resume: each threshold fires once
        context=_movement_context(deps, job, piece, movement, state, gateway, store),
        conversation=conversation,
        reminder=task_reminder(deps.settings, held, names),
        approvals=approvals,
        client_tools=client_tools,
    )
    for nudge in range(NUDGES + 1):
        outcome = await run_turn(
            deps.llm, store, mcp.tools, ctx, config, HubTurnEvents(deps.hub, job)
        )
        if outcome.status == "waiting":
            return _waiting(job, outcome, config)
        if outcome.status == "cancelled":
            stopped = INTERRUPTED_BY_USER if held.interrupt_requested else CANCELLED
            await close_dangling_tool_uses(store, stopped)
            return None
        ended = _movement_ended(outcome, movement, gateway)
        if ended is not None:
            return ended
        if nudge < NUDGES:
            await store.record(Note(user_text(MUST_TRANSITION)))
    return Transition(
        piece.forced_step(movement),
        f"forced: step {movement.name!r} ended {NUDGES + 1} times without calling transition",
        None,
        forced=True,
    )


def _waiting(job: Job, outcome: TurnOutcome, config: TurnConfig) -> Outcome:
    """The movement waits for people: the job moves to `waiting_human` with one action per
    held call and gives its session's chat segment back, in one transaction; the movement
    stays open, to be taken up again from the log once they answered."""
    client = {spec.name for spec in config.client_tools}
    asked = [
        Asked(held.block, held.decision, client=held.block.name in client) for held in outcome.held
    ]

    async def also(db: AsyncSession) -> None:
        await open_actions(db, job, asked)
        await _lend_segment_back(db, job)

    return Outcome(JobStatus.waiting_human, also=also)


async def _lend_segment_back(db: AsyncSession, job: Job) -> None:
    """The chat's segment made the session's current again while the job waits, the open
    movement kept (`begin` takes its segment back)."""
    current = await JobRepository(db).get(job.id)
    if current is None:
        return
    state = dict(current.state or {})
    segment = state.get("chat_segment")
    if segment is None:
        return
    await SessionRepository(db).set_segment(job.session_id, int(segment))
    state["chat_segment"] = None
    current.state = state
    current.updated_at = utcnow()
    await JobRepository(db).save(current)
    job.state = current.state


def _movement_context(
    deps: Deps,
    job: Job,
    piece: Piece,
    movement: Movement,
    state: PieceState,
    gateway: MovementGateway,
    store: DbTurnStore,
) -> MovementContext:
    """The movement's context policy: a transition it forces is the gateway's result, and
    what fires is remembered with the movement's open state."""

    def force(ratio: float) -> None:
        if gateway.result is None:
            summary = f"forced: the context reached {ratio:.0%} of the window"
            gateway.result = Transition(piece.forced_step(movement), summary, None, forced=True)

    async def remember(db: AsyncSession, actions: tuple[ContextAction, ...]) -> None:
        if state.open is not None:
            state.open.fired = [*state.open.fired, *actions]
            await _store_state(db, job, state)

    return MovementContext(
        deps.settings,
        job_database(deps, job),
        session_id=job.session_id,
        job_id=job.id,
        movement=movement.name,
        store=store,
        force=force,
        fired=state.open.fired if state.open is not None else (),
        remember=remember,
        window=deps.window,
    )


def _movement_ended(
    outcome: TurnOutcome, movement: Movement, gateway: MovementGateway
) -> Transition | Outcome | None:
    """How a turn of the movement ended it: a transition, a failure, or not at all (the
    model ended its turn without calling transition)."""
    if gateway.result is not None:
        return gateway.result
    if outcome.status == "context_exhausted":
        return Outcome(JobStatus.failed, error=context_exhausted(outcome.detail))
    if outcome.status == "max_iterations":
        detail = (
            f"step {movement.name!r} made {outcome.iterations} LLM calls without "
            f"calling transition (max_iterations {movement.max_iterations})"
        )
        return Outcome(
            JobStatus.failed,
            error=problem("movement-max-iterations", "Too many iterations", detail),
        )
    return None
