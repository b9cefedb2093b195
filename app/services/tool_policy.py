"""Tool policies: each layer's rules checked when they are written, a turn's compiled once.

The layers, highest first (`app.domain.tool_policy`): the operator's, a JSON file
(`STRATA_TOOL_POLICY_FILE`) read when a process starts; the tenant's (`PUT /tool-policy`);
the session's (its `tool_policy`; a job runs under its session's); a piece movement's
(its `tool_policy` in the piece file). A rule must name a tool that is offered: one of
the server's builtin tools, or an MCP tool (`mcp__…`, offered when a session runs, not
checked). `effective_policy` compiles the four layers into one `Policy`, which decides a
call in memory; the check route answers with it, and the runner of a chat turn or of a
piece job's movement asks it before each call (`app.worker.approvals`); an MCP tool no
rule names takes its own default (`ask` unless its server is trusted and the tool
declares `readOnlyHint`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Session
from app.db.repositories.tool_policies import TenantRules, ToolPolicyRepository
from app.domain.errors import InvalidInput
from app.domain.tool_policy import (
    OFFERED_LATER,
    Decision,
    Layer,
    Mention,
    Policy,
    RuleBounds,
    ToolDefault,
    ToolPolicyRule,
    ToolRule,
    check_rules,
    rules_of,
)
from app.engine.pieces import Movement, PieceCatalog
from app.engine.tools import Tool, ToolRegistry
from app.services.mcp_attach import session_mcp_tools
from app.services.sessions import get_session
from app.settings import Settings

_RULES = TypeAdapter(list[ToolPolicyRule])


class ToolPolicyFileError(ValueError):
    """The operator's rules file cannot be read or holds a bad rule: the process does
    not start."""


def load_operator_rules(path: Path | None, bounds: RuleBounds) -> tuple[ToolRule, ...]:
    """The operator's layer from `STRATA_TOOL_POLICY_FILE` (none without a file), or
    ToolPolicyFileError naming the file and the rule at fault."""
    if path is None:
        return ()
    where = f"STRATA_TOOL_POLICY_FILE {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolPolicyFileError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolPolicyFileError(f"{where}: not JSON ({exc})") from None
    try:
        rules = _RULES.validate_python(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ToolPolicyFileError(f"{where}: {_rule_field(error['loc'])}: {error['msg']}") from None
    try:
        check_rules(rules, bounds, "rules")
    except InvalidInput as exc:
        raise ToolPolicyFileError(f"{where}: {exc.detail}") from None
    return tuple(rule.compiled() for rule in rules)


def _rule_field(loc: Sequence[int | str]) -> str:
    """`rules[2].tool` for the place `(2, "tool")` of the file's list."""
    name = "rules"
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else f".{part}"
    return name


def effective_policy(
    *,
    operator: Sequence[ToolRule],
    tenant: Sequence[ToolRule],
    session: Sequence[ToolRule],
    movement: Sequence[ToolRule] = (),
    builtin: Iterable[str],
    defaults: Mapping[str, ToolDefault] | None = None,
) -> Policy:
    """The four layers of one turn or movement, compiled: what the runner builds once at
    its start (the tenant's rules read once, the session's from its row, the movement's
    from the loaded piece) and asks per tool call (`Policy.decide`). `defaults`: the
    offered tools' own defaults besides the builtin ones' (MCP tools)."""
    return Policy(
        {
            Layer.operator: operator,
            Layer.tenant: tenant,
            Layer.session: session,
            Layer.movement: movement,
        },
        builtin,
        defaults,
    )


# --- the tenant's layer ---------------------------------------------------------------


async def tenant_rules(db: AsyncSession, tenant: str) -> TenantRules:
    return await ToolPolicyRepository(db).get(tenant)


async def replace_tenant_rules(
    db: AsyncSession, tenant: str, rules: Sequence[ToolPolicyRule], bounds: RuleBounds
) -> TenantRules:
    return await ToolPolicyRepository(db).replace(tenant, check_rules(rules, bounds, "rules"))


# --- a session's tools and the check ----------------------------------------------------


@dataclass(frozen=True)
class PolicyContext:
    """What a session's policy is built from besides the database: the operator's rules,
    the server's tools and its pieces, and the settings its MCP servers are reached by."""

    operator: Sequence[ToolRule]
    tools: ToolRegistry
    pieces: PieceCatalog
    settings: Settings


@dataclass(frozen=True)
class SessionTool:
    tool: Tool[Any]
    decision: Decision
    mentions: list[Mention]
    server: str | None = None  # an MCP tool's server


def chat_tools(session: Session, tools: ToolRegistry) -> list[str]:
    """The tools a session's chat turns offer: its own list, else every chat tool."""
    return list(session.tools) if session.tools is not None else tools.chat_names


async def _policy(
    db: AsyncSession,
    tenant: str,
    session: Session,
    context: PolicyContext,
    mcp: Sequence[tuple[Tool[Any], str]],
    movement: str | None = None,
) -> Policy:
    """The session's policy, its MCP tools' defaults with it: in `movement`
    (`piece/movement`) when given."""
    found = movement_named(context.pieces, movement) if movement is not None else None
    tenant_layer = await ToolPolicyRepository(db).get(tenant)
    return effective_policy(
        operator=context.operator,
        tenant=rules_of(tenant_layer.rules),
        session=rules_of(session.tool_policy),
        movement=found.policy_rules() if found is not None else (),
        builtin=context.tools.names,
        defaults={tool.name: tool.policy_default for tool, _ in mcp if tool.policy_default},
    )


async def session_tools(
    db: AsyncSession, tenant: str, session_id: str, context: PolicyContext
) -> list[SessionTool]:
    """The tools the session's chat turns offer, each with its tool-level decision (what
    a call gets unless a rule on its input says otherwise) and every rule naming it; its
    MCP servers' tools after the builtin ones, as the servers list them now."""
    session = await get_session(db, tenant, session_id)
    mcp = await session_mcp_tools(db, context.settings, tenant, session)
    policy = await _policy(db, tenant, session, context, mcp)
    registered = {tool.name: tool for tool in context.tools.tools}
    builtin = [
        SessionTool(registered[name], policy.tool_level(name), policy.mentions(name))
        for name in chat_tools(session, context.tools)
        if name in registered
    ]
    return builtin + [
        SessionTool(tool, policy.tool_level(tool.name), policy.mentions(tool.name), server)
        for tool, server in mcp
    ]


async def check_call(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    context: PolicyContext,
    *,
    tool: str,
    tool_input: Mapping[str, object],
    movement: str | None = None,
) -> Decision:
    """Which rule of which layer decides a call of `tool` with `tool_input` in the session
    (in a piece's movement, `piece/movement`, when given), or the tool's default (an MCP
    tool's from its server's listing now: one the session does not offer asks)."""
    session = await get_session(db, tenant, session_id)
    if tool not in context.tools.names and not tool.startswith(OFFERED_LATER):
        raise InvalidInput(
            f"tool: {tool!r} is no tool of this server ({', '.join(sorted(context.tools.names))}"
            f"; MCP tools are named {OFFERED_LATER}<server>__<tool>)",
            field="tool",
        )
    mcp = (
        await session_mcp_tools(db, context.settings, tenant, session)
        if tool.startswith(OFFERED_LATER)
        else []
    )
    policy = await _policy(db, tenant, session, context, mcp, movement)
    return policy.decide(tool, tool_input)


def movement_named(pieces: PieceCatalog, reference: str) -> Movement:
    """The movement `piece/movement` names, or InvalidInput on `movement`."""
    piece_name, _, movement_name = reference.partition("/")
    piece = pieces.get(piece_name)
    if piece is None:
        raise InvalidInput(f"movement: there is no piece {piece_name!r}", field="movement")
    try:
        return piece.movement(movement_name)
    except KeyError:
        names = ", ".join(m.name for m in piece.movements)
        raise InvalidInput(
            f"movement: piece {piece_name!r} has no movement {movement_name!r} ({names})",
            field="movement",
        ) from None
