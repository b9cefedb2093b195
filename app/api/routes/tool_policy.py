"""Tool policies: the tenant's rules, a session's tools with their policies, and which
rule decides a call."""

from __future__ import annotations

from fastapi import APIRouter
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import (
    CurrentTenant,
    DatabaseDep,
    RuntimeDep,
    SessionDep,
    policy_bounds,
    policy_context,
)
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.tool_policy import (
    PolicyDecision,
    SessionToolList,
    SessionToolPublic,
    ToolPolicyCheck,
    ToolPolicyPublic,
    ToolPolicyPut,
)
from app.services import tool_policy as service

router = APIRouter(tags=["tools"], responses=problem_responses(401, 503))


@router.get(
    "/tool-policy",
    name="get_policy",
    summary="The tenant's tool policy rules",
    description=(
        "The tenant's layer of the tool policy, an ordered list where the last "
        "matching rule wins, and when it was last replaced; empty when never set."
    ),
)
async def get_policy(db: SessionDep, tenant: CurrentTenant) -> ToolPolicyPublic:
    found = await service.tenant_rules(db, tenant)
    return ToolPolicyPublic.model_validate({"rules": found.rules, "updated_at": found.updated_at})


@router.put(
    "/tool-policy",
    name="replace_policy",
    summary="Replace the tenant's tool policy rules",
    description="The list is replaced whole (`[]` removes every rule). A rule must name a "
    "tool of this server (`GET /tools`), or an MCP tool (`mcp__…`, not checked); a glob "
    "that cannot compile, an unknown field or effect, or more than "
    "`STRATA_TOOL_POLICY_MAX_RULES` rules is a 422 naming the field (`rules[2].tool`).",
    responses=problem_responses(413, 422),
)
async def replace_policy(
    body: ToolPolicyPut, database: DatabaseDep, tenant: CurrentTenant, runtime: RuntimeDep
) -> ToolPolicyPublic:
    async def work(db: AsyncSession) -> ToolPolicyPublic:
        kept = await service.replace_tenant_rules(db, tenant, body.rules, policy_bounds(runtime))
        return ToolPolicyPublic(rules=body.rules, updated_at=kept.updated_at)

    return await database.write(work)


@router.get(
    "/sessions/{session_id}/tools",
    name="session_tools",
    summary="The tools a session offers, each with its effective policy",
    description="Each tool the session's chat turns offer (its `tools`, else every chat "
    "tool; then its MCP servers' tools, listed now, with their `server`) with the "
    "tool-level decision of the operator's, the tenant's and the "
    "session's rules, and every rule naming it, so a rule that never decides shows. "
    "What decides one call (its input, a piece's movement) says "
    "`POST /sessions/{session_id}/tool-policy/check`.",
    responses=problem_responses(404, 422),
)
async def session_tools(
    session_id: SessionId, db: SessionDep, tenant: CurrentTenant, runtime: RuntimeDep
) -> SessionToolList:
    found = await service.session_tools(db, tenant, session_id, policy_context(runtime))
    return SessionToolList(data=[SessionToolPublic.of(tool) for tool in found])


@router.post(
    "/sessions/{session_id}/tool-policy/check",
    name="check_policy",
    summary="Which rule of which layer decides a tool call in a session",
    description="The call is decided by the four layers' rules: within a layer the last "
    "matching rule, the lowest layer with one decides, a `deny` is final; no match: the "
    "tool's default (`default` says which; an MCP tool's is `ask` unless its server is "
    "trusted and the tool declares `readOnlyHint`). Nothing runs. An unknown tool, "
    "piece or movement is a 422. A chat turn decides each call so, and so does a piece "
    "job's movement (give `movement` to see its layer).",
    responses=problem_responses(404, 413, 422),
)
async def check_policy(
    session_id: SessionId,
    body: ToolPolicyCheck,
    db: SessionDep,
    tenant: CurrentTenant,
    runtime: RuntimeDep,
) -> PolicyDecision:
    decision = await service.check_call(
        db,
        tenant,
        session_id,
        policy_context(runtime),
        tool=body.tool,
        tool_input=body.input,
        movement=body.movement,
    )
    return PolicyDecision.of(decision)
