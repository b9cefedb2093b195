"""The agent loop's tool policy and the people's decisions (`Approvals`), for one job.

Deciding a call is the turn's compiled policy, in memory. What people decided is read
only when a turn starts with calls left unanswered (a turn that waited, or a crash),
and a resolved call is marked started, by a write fenced by the job's lease, before it
runs: a later run of the job (another runner's, after this one's lease was lost) finds
it started and never runs it again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import JobAction
from app.db.repositories.actions import ActionRepository
from app.db.types import utcnow
from app.domain.actions import EXPIRED, ActionDecision, ActionStatus, Resolution, resolution_of
from app.domain.items import ToolUseBlock
from app.domain.tool_policy import Decision, Effect, Policy, ToolRule
from app.services.leases import JobDatabase

_UNKNOWN = Decision(Effect.allow)
"""A call of a tool the server does not have: nothing would run, the registry answers it
an error the model reads (holding it for a person would only delay that)."""


_CLIENT = Decision(Effect.ask)
"""A call of a client tool: the server cannot run it, its client answers it."""


class JobApprovals:
    def __init__(
        self,
        policy: Policy,
        database: JobDatabase,
        known: Collection[str],
        client: Collection[str] = (),
    ) -> None:
        self.policy = policy
        self.database = database
        self.known = frozenset(known)
        self.client = frozenset(client)

    def decide(self, tool: str, tool_input: Mapping[str, Any]) -> Decision:
        if tool in self.client:
            return _CLIENT
        if tool not in self.known:
            return _UNKNOWN
        return self.policy.decide(tool, tool_input)

    async def resolutions(self, blocks: Sequence[ToolUseBlock]) -> Mapping[str, Resolution]:
        job_id = self.database.job.id
        async with self.database.read() as db:
            actions = await ActionRepository(db).of_calls(job_id, [b.id for b in blocks])
        return {
            action.tool_use_id: found
            for action in actions
            if (found := _resolution(action)) is not None
        }

    async def starting(self, resolutions: Sequence[Resolution]) -> None:
        ids = [r.action_id for r in resolutions]

        async def work(db: AsyncSession) -> None:
            await ActionRepository(db).mark_started(ids, utcnow())

        await self.database.write_statements(work)


def _resolution(action: JobAction) -> Resolution | None:
    """What a decided action makes of its call; None while it is pending (or cancelled:
    its call was answered when its job ended)."""
    if action.status == ActionStatus.expired.value:
        return Resolution(False, content=action.content or EXPIRED, is_error=True)
    if action.status != ActionStatus.resolved.value or action.decision is None:
        return None
    return resolution_of(
        ActionDecision(action.decision),
        tool_input=action.input,
        edited=action.decided_input,
        content=action.content,
        is_error=action.is_error,
        reason=action.reason,
        action_id=action.id,
        started=action.started_at is not None,
    )


MOVEMENT_CANNOT_ASK = (
    "this call waits for a person's approval under its tool policy, and a piece movement "
    "cannot wait for one; a tool policy rule that allows it lets it run"
)


class MovementApprovals:
    """A piece movement's tool policy, on its MCP tools: their calls are decided by the
    four layers and each tool's default, and one the policy would hold for a person is
    refused (a movement cannot wait for one). The builtin tools run as the model asks:
    movements do not apply the rules to them. Nobody decides on a movement's calls, so a
    call left unanswered by a stopped worker has no resolution."""

    def __init__(self, policy: Policy, mcp: Collection[str]) -> None:
        self.policy = policy
        self.mcp = frozenset(mcp)

    def decide(self, tool: str, tool_input: Mapping[str, Any]) -> Decision:
        if tool not in self.mcp:
            return _UNKNOWN
        decision = self.policy.decide(tool, tool_input)
        if decision.effect is not Effect.ask:
            return decision
        refusal = ToolRule(tool=tool, effect=Effect.deny, reason=MOVEMENT_CANNOT_ASK)
        return replace(decision, effect=Effect.deny, rule=refusal)

    async def resolutions(self, blocks: Sequence[ToolUseBlock]) -> Mapping[str, Resolution]:
        return {}

    async def starting(self, resolutions: Sequence[Resolution]) -> None:
        return None
