"""What each kind of job does. The runner claims, leases and finishes; these decide.

A handler returns an `Outcome`; its `also` runs inside the transaction that
records the job's end, so what a finished job implies (a turn's memory, the next
background job) is never lost between two commits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, Session
from app.db.repositories.sessions import SessionRepository, peek_turn_start, probe_from
from app.domain.errors import PROBLEM_PREFIX
from app.domain.items import ItemPayload
from app.domain.jobs import JobStatus
from app.domain.tool_policy import ToolRule, rules_of
from app.engine.context import WindowLimit
from app.engine.llm import LLM, ToolSpec
from app.engine.loop import TurnConfig, TurnOutcome, run_turn
from app.engine.pieces import PieceCatalog
from app.engine.tools import ToolContext, ToolRegistry
from app.memory.noise import CleanedTexts
from app.services.actions import Asked, open_actions
from app.services.chat import append_turn_input, turn_input
from app.services.files import ToolImages
from app.services.leases import JobDatabase
from app.services.live import LiveHub
from app.services.memory import (
    BlockLimits,
    clean_ahead,
    has_predecessors,
    memory_block,
    project_turns,
)
from app.services.session_view import SessionView, give_back, take_view
from app.services.sessions import get_session, session_from
from app.services.summaries import enqueue_if_needed
from app.services.tool_policy import effective_policy
from app.services.workspace_snapshots import at_turn_start
from app.settings import Settings
from app.worker.approvals import JobApprovals
from app.worker.compaction import CompactionFailed, compact_session
from app.worker.context_policy import ChatContext
from app.worker.job_session import JobSession
from app.worker.mcp_tools import TurnMcp, turn_mcp
from app.worker.memory_gateway import LogMemoryGateway
from app.worker.reminder import task_reminder
from app.worker.summaries import summarize_backlog
from app.worker.task_gateway import JobTaskGateway
from app.worker.turn_store import DbTurnStore, HubTurnEvents

logger = logging.getLogger("strata.jobs")

# what a job's end also writes, in its transaction (what it returns is not used)
Also = Callable[[AsyncSession], Awaitable[object]]


def problem(slug: str, title: str, detail: str) -> dict[str, Any]:
    return {"type": PROBLEM_PREFIX + slug, "title": title, "detail": detail}


@dataclass
class Outcome:
    status: JobStatus
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    also: Also | None = None
    # run on the runner's loop once the end (with `also`) committed
    committed: Callable[[], None] | None = None


@dataclass
class Deps:
    settings: Settings
    database: Database
    hub: LiveHub
    llm: LLM
    tools: ToolRegistry
    pieces: PieceCatalog
    operator_policy: tuple[ToolRule, ...] = ()  # the operator's tool policy rules
    # the context window requests are held to: the setting, or less once the API said so
    window: WindowLimit = field(init=False)

    def __post_init__(self) -> None:
        self.window = WindowLimit(self.settings.context_window_tokens)


def job_database(deps: Deps, job: Job) -> JobDatabase:
    return JobDatabase(deps.database, job)


def tool_context(deps: Deps, session: JobSession, **extra: Any) -> ToolContext:
    """What every tool of a job may use: the task list and memory over the log, and the
    tenant's file store for the images its results carry."""
    job = session.job
    return ToolContext(
        tenant=job.tenant,
        session_id=job.session_id,
        job_id=job.id,
        tasks=JobTaskGateway(session),
        memory=LogMemoryGateway(deps.settings, session.database, job),
        images=ToolImages(session.database, deps.settings, job.tenant),
        **extra,
    )


def remember_turn(
    deps: Deps, job: Job, session: Session | None = None, cleaned: CleanedTexts | None = None
) -> Also:
    """At a turn's end: its L2/L3, and the L1 backlog job when the chain outgrew the window.

    `session` is the session's row as the turn's start read it, when it did: which chain
    the turn belongs to changes only by a merge, and a merge queues the summaries it
    makes due itself. Without it, the row is read here. `cleaned`: the turn's texts
    cleaned before the end's transaction (`clean_ahead`); the others are cleaned in it."""

    async def also(db: AsyncSession) -> None:
        if job.turn is None:
            return
        await project_turns(db, job.session_id, [job.turn], cleaned)
        chain = session
        if chain is None:
            rows = await SessionRepository(db).session_row(job.session_id)
            chain = session_from(rows, job.tenant, job.session_id)
        await enqueue_if_needed(db, chain, deps.settings.memory_l2_window_turns)

    return also


async def _system_prompt(deps: Deps, job: Job, session: Session) -> str | None:
    """The session's own prompt, then the memory block of the chain it continues."""
    own = session.system_prompt
    if not has_predecessors(session):  # its block is empty: no read per turn for it
        return own
    async with deps.database.read() as db:
        block = await memory_block(
            db,
            job.tenant,
            job.session_id,
            limits=BlockLimits.of(deps.settings),
            tz=deps.settings.zone,
        )
    parts = [p for p in (own, block.text) if p]
    return "\n\n".join(parts) or None


async def _start_turn(deps: Deps, job: Job) -> tuple[Session, list[dict[str, Any]]]:
    """The session and its tenant's tool policy rules, read by one statement without an
    ORM session; and first the user's item, when it is not in the log yet: it is
    appended at enqueue, or for a turn queued behind another by the claim
    (`Handler.on_claim`), unless that claim had to be made without the jobs' starts."""
    if turn_input(job) is None:
        await job_database(deps, job).write_statements(lambda db: append_turn_input(db, job))
    rows, tenant_rules = await peek_turn_start(deps.database, job.session_id)
    return session_from(rows, job.tenant, job.session_id), tenant_rules


def turn_approvals(
    deps: Deps,
    job: Job,
    session: Session,
    tenant_rules: list[dict[str, Any]],
    mcp: TurnMcp,
    client: list[str],
    movement: Sequence[ToolRule] = (),
) -> JobApprovals:
    """The tool policy of a chat turn or a piece movement, compiled once at its start: the
    operator's rules, the tenant's, the session's and (a movement) its own, over the
    builtin tools and the MCP tools it offers (an MCP tool no rule names takes its own
    default); `client` names the client tools, held for their client's answer."""
    return JobApprovals(
        effective_policy(
            operator=deps.operator_policy,
            tenant=rules_of(tenant_rules),
            session=rules_of(session.tool_policy),
            movement=movement,
            builtin=deps.tools.names,
            defaults=mcp.tools.policy_defaults(),
        ),
        job_database(deps, job),
        [*deps.tools.names, *mcp.names],
        client,
    )


async def run_chat(deps: Deps, job: Job) -> Outcome:
    """A chat turn: its session held in memory, the loop, and the job's end, which writes
    the turn's answer (when the store kept it for the end) and the turn's memory."""
    session, tenant_rules = await _start_turn(deps, job)
    await at_turn_start(deps.settings, job, session.last_seq)
    # what the process has read of the session: the last turn's, or a REST write's since
    view = take_view(deps.database.caches, job.session_id)
    held = JobSession(
        job_database(deps, job),
        job,
        view=view,
        checkpoint_every=deps.settings.task_checkpoint_ops,
    )
    if (item := turn_input(job)) is not None:
        held.known(*item)
    held.probed(probe_from(session, job.cancel_requested, job.interrupt_requested))
    store = DbTurnStore(held, answer_with_end=True, takes_steers=True)
    mcp = await turn_mcp(deps.settings, deps.database, deps.hub, deps.tools, job, session)
    try:
        config = await _chat_config(deps, job, session, held, view, mcp)
        config.approvals = turn_approvals(
            deps, job, session, tenant_rules, mcp, [spec.name for spec in config.client_tools]
        )
        ctx = tool_context(deps, held)
        outcome = await run_turn(
            deps.llm, store, mcp.tools, ctx, config, HubTurnEvents(deps.hub, job)
        )
    finally:
        await mcp.close()
    if outcome.status == "waiting":
        return _waiting(deps, job, outcome, view, config)
    if outcome.status == "cancelled":  # its open calls are answered with its end
        await store.close_at_end()
    user = [] if (user_item := _user_item(job)) is None else [user_item]
    cleaned = await clean_ahead(
        [*user, *store.written], thread_chars=deps.settings.memory_clean_thread_chars
    )

    def committed() -> None:
        # given back once the answer is in the log, with it: the session's next reader in
        # this process then holds the log up to there without a read
        store.ended()
        give_back(deps.database.caches, view)

    also = store.ending(remember_turn(deps, job, session, cleaned))
    return replace(_turn_ended(deps, outcome), also=also, committed=committed)


def _waiting(
    deps: Deps, job: Job, outcome: TurnOutcome, view: SessionView, config: TurnConfig
) -> Outcome:
    """The turn waits for people: the job moves to `waiting_human` with one action per
    held call, in one transaction; its memory is projected when the turn ends."""
    client = {spec.name for spec in config.client_tools}
    asked = [
        Asked(held.block, held.decision, client=held.block.name in client) for held in outcome.held
    ]

    async def also(db: AsyncSession) -> None:
        await open_actions(db, job, asked)

    return Outcome(
        JobStatus.waiting_human,
        also=also,
        committed=lambda: give_back(deps.database.caches, view),
    )


async def _chat_config(
    deps: Deps, job: Job, session: Session, held: JobSession, view: SessionView, mcp: TurnMcp
) -> TurnConfig:
    """How the session's turn runs: its model, prompt, tools (its MCP servers' and its
    client's too), limits, reminder, context policy, and the messages the session's view
    holds from its previous turns."""
    tool_names = [*session_tools(deps, session), *mcp.names]
    # the session's client tools, then its message's (which replace one of the same name)
    offered_by_client = {
        str(tool["name"]): tool
        for tool in [*(session.client_tools or ()), *(job.input.get("client_tools") or ())]
    }
    client_tools = [ToolSpec.model_validate(tool) for tool in offered_by_client.values()]
    offered = bool(mcp.tools.specs(tool_names)) or bool(client_tools)
    return TurnConfig(
        model=session.model or deps.settings.model,
        system=await _system_prompt(deps, job, session),
        tool_names=tool_names,
        max_iterations=deps.settings.agent_max_iterations,
        max_tokens=deps.settings.llm_max_tokens,
        context=ChatContext(
            deps.settings,
            lambda: _compact_now(deps, job, tool_names, _user_item(job)),
            window=deps.window,
        ),
        conversation=view.conversation(tools_offered=offered),
        reminder=task_reminder(deps.settings, held, tool_names),
        client_tools=client_tools,
    )


def _turn_ended(deps: Deps, outcome: TurnOutcome) -> Outcome:
    """How a chat job ends, from how its turn ended."""
    if outcome.status == "cancelled":
        return Outcome(JobStatus.cancelled)
    if outcome.status == "max_iterations":
        detail = (
            f"the agent made {outcome.iterations} LLM calls without ending its turn "
            f"(STRATA_AGENT_MAX_ITERATIONS={deps.settings.agent_max_iterations})"
        )
        error = problem("agent-max-iterations", "Too many iterations", detail)
        return Outcome(JobStatus.failed, error=error)
    if outcome.status == "context_exhausted":
        return Outcome(JobStatus.failed, error=context_exhausted(outcome.detail))
    return Outcome(JobStatus.succeeded, result={"text": outcome.final_text})


def context_exhausted(detail: str) -> dict[str, Any]:
    return problem("context-exhausted", "Context window exhausted", detail)


def session_tools(deps: Deps, session: Session) -> list[str]:
    """The tools a session's chat turns offer: its own list, else every chat tool."""
    return list(session.tools) if session.tools is not None else deps.tools.chat_names


def _user_item(job: Job) -> ItemPayload | None:
    item = turn_input(job)
    return None if item is None else item[1]


async def _compact_now(
    deps: Deps,
    job: Job,
    tool_names: list[str],
    user_item: ItemPayload | None = None,
) -> int:
    """Compact the job's session; `user_item`: a chat turn's own message (see
    `compact_session`)."""
    return await compact_session(
        settings=deps.settings,
        database=job_database(deps, job),
        llm=deps.llm,
        tenant=job.tenant,
        session_id=job.session_id,
        job_id=job.id,
        turn=job.turn,
        offers_task_list="TaskList" in tool_names,
        window_tokens=deps.window.tokens,
        turn_input=user_item,
    )


async def run_compact(deps: Deps, job: Job) -> Outcome:
    async with deps.database.read() as db:
        session = await get_session(db, job.tenant, job.session_id)
    try:
        segment = await _compact_now(deps, job, session_tools(deps, session))
    except CompactionFailed as exc:
        return Outcome(
            JobStatus.failed, error=problem("compaction-failed", "Compaction failed", exc.detail)
        )
    return Outcome(JobStatus.succeeded, result={"segment": segment})


async def run_summarize(deps: Deps, job: Job) -> Outcome:
    written = await summarize_backlog(deps.settings, job_database(deps, job), deps.llm, job)
    return Outcome(JobStatus.succeeded, result={"summarized": written})
