"""Pending actions: a turn's tool calls that wait for a person, and their resolution.

A response whose calls a policy `ask`s leaves its job `waiting_human` with one action per
such call, written in the transaction of that move (`open_actions`). Resolving them
(`resolve_actions`) is one transaction: the decisions, their `action.resolved` events,
a remembered rule, and, once no action of the job is pending, the job queued again; the
runner then continues the turn from the log (`app.engine.loop`). An action whose `expires_in`
passed is resolved by its rule's `on_timeout` (`expire_due`): denied, or its job cancelled.
A job that ends while it waits cancels its pending actions (`close_pending`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job, JobAction
from app.db.repositories.actions import ActionRepository
from app.db.repositories.sessions import SessionRepository
from app.db.repositories.tool_policies import ToolPolicyRepository
from app.db.types import utcnow
from app.domain.actions import (
    EXPIRED,
    ActionDecision,
    ActionKind,
    ActionStatus,
)
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.ids import new_id
from app.domain.items import ToolUseBlock
from app.domain.jobs import TERMINAL, JobStatus
from app.domain.tool_policy import Decision, Effect, OnTimeout, ToolPolicyRule
from app.engine.tools import ToolRegistry
from app.services.jobs import (
    announce_action,
    cancel_job,
    close_call,
    get_job,
    get_job_locked,
    set_status,
)
from app.services.pagination import Page, page_of


@dataclass(frozen=True)
class Asked:
    """A call a policy asked about, as the loop left it unanswered."""

    block: ToolUseBlock
    decision: Decision
    client: bool = False  # a client tool's call: only `respond` answers it


@dataclass(frozen=True)
class ActionChoice:
    """One decision a person sends on one action."""

    action_id: str
    decision: ActionDecision
    input: dict[str, Any] | None = None
    content: str | None = None
    is_error: bool = False
    reason: str | None = None
    remember: str | None = None  # "session" | "tenant"


async def _announce(db: AsyncSession, type_: str, action: JobAction, tenant: str) -> None:
    await announce_action(db, type_, action, tenant)


# --- the wait ------------------------------------------------------------------------


async def open_actions(db: AsyncSession, job: Job, asked: Sequence[Asked]) -> list[JobAction]:
    """One pending action per asked call, each an `action.required` event, in the
    transaction that moves `job` to `waiting_human`."""
    now = utcnow()
    repo = ActionRepository(db)
    # a call held again (its job resumed before its wait committed) keeps its action
    known = {a.tool_use_id for a in await repo.of_calls(job.id, [a.block.id for a in asked])}
    rows = []
    for one in asked:
        if one.block.id in known:
            continue
        rule = one.decision.rule
        expires_in = rule.expires_in if rule is not None else None
        on_timeout = None
        if rule is not None and expires_in is not None:
            on_timeout = rule.on_timeout or OnTimeout.deny
        row = JobAction(
            id=new_id("act"),
            tenant=job.tenant,
            job_id=job.id,
            session_id=job.session_id,
            tool_use_id=one.block.id,
            tool=one.block.name,
            input=dict(one.block.input),
            kind=(ActionKind.client_tool if one.client else ActionKind.tool).value,
            layer=None if one.decision.layer is None else one.decision.layer.value,
            rule_index=one.decision.index,
            rule=None
            if rule is None
            else ToolPolicyRule.of(rule).model_dump(mode="json", exclude_defaults=True),
            on_timeout=None if on_timeout is None else on_timeout.value,
            created_at=now,
            expires_at=None if expires_in is None else now + timedelta(seconds=expires_in),
        )
        rows.append(await repo.save(row))
    for row in rows:
        await _announce(db, "action.required", row, job.tenant)
    return rows


async def pending_actions(db: AsyncSession, job: Job) -> list[JobAction]:
    """What a job waits for: its pending actions (a read only while it waits)."""
    if job.status != JobStatus.waiting_human:
        return []
    return await ActionRepository(db).of_job(job.id, pending_only=True)


async def list_actions(db: AsyncSession, tenant: str, job_id: str) -> list[JobAction]:
    await get_job(db, tenant, job_id)
    return await ActionRepository(db).of_job(job_id)


async def list_tenant_actions(
    db: AsyncSession,
    tenant: str,
    *,
    limit: int,
    after: str | None,
    status: ActionStatus | None = None,
) -> Page[JobAction]:
    """The tenant's actions across all its jobs, newest first (`status=pending`: what
    waits for a person now)."""
    rows = await ActionRepository(db).list_page(
        tenant,
        limit=limit + 1,
        before_id=after,
        status=None if status is None else status.value,
    )
    return page_of(rows, limit, lambda row: row.id)


# --- resolving ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolveContext:
    """What a resolution checks against besides the database: the server's tools (an
    edited input is validated against its tool's input schema) and how many rules a
    layer holds (a remembered rule is one more)."""

    tools: ToolRegistry
    max_rules: int


async def resolve_actions(
    db: AsyncSession,
    tenant: str,
    job_id: str,
    choices: Sequence[ActionChoice],
    context: ResolveContext,
) -> list[JobAction]:
    """Resolve the actions `choices` name, all or none. Sending an action's decision again
    changes nothing (the same answer); another decision on a resolved action, or any on
    one that expired or whose job ended, is a 409; an action not of this job a 404; an
    edited input its tool refuses a 422. Once the job has no pending action left, it is
    queued again: its turn goes on from the log."""
    job = await get_job_locked(db, tenant, job_id)
    repo = ActionRepository(db)
    resolved: list[JobAction] = []
    changed = False
    for index, choice in enumerate(choices):
        action = await repo.get(choice.action_id, locked=True)
        if action is None or action.job_id != job.id:
            raise NotFound(f"job {job_id!r} has no action {choice.action_id!r}", resource="action")
        where = f"actions[{index}]" if len(choices) > 1 else ""
        edited = _checked(choice, action, context.tools, where)
        if action.status == ActionStatus.resolved.value:
            if not _same(action, choice, edited):
                raise Conflict(
                    f"action {action.id!r} was resolved already ({action.decision}); "
                    "a different decision cannot replace it",
                    reason="action-resolved",
                )
            resolved.append(action)
            continue
        if action.status != ActionStatus.pending.value or job.status in TERMINAL:
            raise Conflict(
                f"action {action.id!r} is {action.status} (its job is {job.status}); "
                "nothing waits for a decision on it",
                reason="action-closed",
                job_status=job.status,
            )
        _decide(action, choice.decision, edited, choice)
        await repo.save(action)
        if choice.remember is not None:
            await _remember(db, job, action, choice, context.max_rules, where)
        await _announce(db, "action.resolved", action, job.tenant)
        resolved.append(action)
        changed = True
    if changed:
        await _resume_if_answered(db, job)
    return resolved


def _checked(
    choice: ActionChoice, action: JobAction, tools: ToolRegistry, where: str
) -> dict[str, Any] | None:
    """The input an `edit` gives, validated against the tool's input schema; None for
    another decision. InvalidInput names the field at fault."""
    prefix = f"{where}." if where else ""
    if (
        action.kind == ActionKind.client_tool.value
        and choice.decision is not ActionDecision.respond
    ):
        at = f"{prefix}decision"
        raise InvalidInput(
            f"{at}: {action.tool!r} is a client tool: the server cannot run it; answer its "
            "call with `respond`",
            field=at,
        )
    if choice.decision is ActionDecision.respond and choice.content is None:
        raise InvalidInput(
            f"{prefix}content: a `respond` gives the call's result", field=f"{prefix}content"
        )
    if choice.decision is not ActionDecision.edit:
        if choice.input is not None:
            raise InvalidInput(
                f"{prefix}input: only an `edit` gives a new input", field=f"{prefix}input"
            )
        return None
    if choice.input is None:
        raise InvalidInput(f"{prefix}input: an `edit` gives the new input", field=f"{prefix}input")
    tool = next((t for t in tools.tools if t.name == action.tool), None)
    if tool is not None:
        try:
            tool.input_model.model_validate(choice.input)
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(part) for part in error["loc"])
            at = f"{prefix}input.{loc}" if loc else f"{prefix}input"
            raise InvalidInput(
                f"{at}: {error['msg']} (the input schema of {action.tool!r})", field=at
            ) from None
    if choice.remember is not None:
        raise InvalidInput(
            f"{prefix}remember: only an `allow` or a `deny` can be remembered as a rule",
            field=f"{prefix}remember",
        )
    return dict(choice.input)


def _same(action: JobAction, choice: ActionChoice, edited: dict[str, Any] | None) -> bool:
    if action.decision != choice.decision.value:
        return False
    if choice.decision is ActionDecision.edit:
        return action.decided_input == edited
    if choice.decision is ActionDecision.respond:
        return action.content == choice.content and action.is_error == choice.is_error
    return True


def _decide(
    action: JobAction,
    decision: ActionDecision,
    edited: dict[str, Any] | None,
    choice: ActionChoice | None = None,
    *,
    status: ActionStatus = ActionStatus.resolved,
    content: str | None = None,
) -> None:
    action.status = status.value
    action.decision = decision.value
    action.resolved_at = utcnow()
    action.decided_input = edited
    if choice is not None:
        action.reason = choice.reason
        if decision is ActionDecision.respond:
            action.content = choice.content
            action.is_error = choice.is_error
    if content is not None:
        action.content = content
        action.is_error = True


async def _remember(
    db: AsyncSession,
    job: Job,
    action: JobAction,
    choice: ActionChoice,
    max_rules: int,
    where: str,
) -> None:
    """Append the rule the decision makes (the asking rule's tool and input globs, with
    the decision's effect) to the session's or the tenant's layer."""
    if choice.decision not in (ActionDecision.allow, ActionDecision.deny):
        field = f"{where}.remember" if where else "remember"
        raise InvalidInput(
            f"{field}: only an `allow` or a `deny` can be remembered as a rule", field=field
        )
    asked = action.rule or {}
    rule: dict[str, Any] = {"tool": asked.get("tool", action.tool)}
    if asked.get("input"):
        rule["input"] = asked["input"]
    rule["effect"] = Effect.allow.value if choice.decision is ActionDecision.allow else "deny"
    if choice.reason:
        rule["reason"] = choice.reason
    if choice.remember == "session":
        sessions = SessionRepository(db)
        session = await sessions.lock(job.session_id)
        if session is None:
            raise NotFound(f"session {job.session_id!r} does not exist", resource="session")
        rules = [*(session.tool_policy or []), rule]
        _bounded(rules, max_rules, where)
        session.tool_policy = rules
        session.updated_at = utcnow()
        await sessions.save(session)
        return
    policies = ToolPolicyRepository(db)
    rules = [*(await policies.get(job.tenant)).rules, rule]
    _bounded(rules, max_rules, where)
    await policies.replace(job.tenant, rules)


def _bounded(rules: Sequence[Mapping[str, Any]], max_rules: int, where: str) -> None:
    if len(rules) > max_rules:
        field = f"{where}.remember" if where else "remember"
        raise InvalidInput(
            f"{field}: that layer holds {max_rules} rules already (STRATA_TOOL_POLICY_MAX_RULES)",
            field=field,
        )


async def _resume_if_answered(db: AsyncSession, job: Job) -> None:
    """Queue the job again once none of its actions is pending."""
    if job.status != JobStatus.waiting_human:
        return
    if not await ActionRepository(db).of_job(job.id, pending_only=True):
        await set_status(db, job, JobStatus.queued)


# --- expiry and the job's end -----------------------------------------------------------


async def any_due(database: Database, now: datetime) -> bool:
    """Whether an action has expired, by one read: an idle sweep never waits for the
    writer."""
    async with database.read() as db:
        return bool(await ActionRepository(db).due(now, 1, lock=False))


async def expire_due(db: AsyncSession, now: datetime, limit: int) -> int:
    """Resolve the pending actions whose `expires_at` passed by their `on_timeout`: a
    denied call's job goes on once nothing else of it is pending; `cancel` cancels the
    job. How many expired."""
    due = await ActionRepository(db).due(now, limit)
    for action in due:
        _decide(action, ActionDecision.deny, None, status=ActionStatus.expired, content=EXPIRED)
        await ActionRepository(db).save(action)
        job = await get_job_locked(db, action.tenant, action.job_id)
        await _announce(db, "action.resolved", action, action.tenant)
        if job.status in TERMINAL:
            continue
        if action.on_timeout == OnTimeout.cancel.value:
            await close_call(db, job, action, EXPIRED)
            await cancel_job(db, job.tenant, job.id)
        else:
            await _resume_if_answered(db, job)
    return len(due)
