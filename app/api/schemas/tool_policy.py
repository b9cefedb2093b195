"""Tool policies in the API: a tenant's rules, a session's tools and what decides a call."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.domain.tool_policy import (
    TOOL_GLOB_MAX_CHARS,
    Decision,
    DefaultBy,
    Effect,
    Layer,
    Mention,
    ToolPolicyRule,
)
from app.services.tool_policy import SessionTool

__all__ = ["Effect", "Layer", "ToolPolicyRule"]

TENANT_POLICY = (
    "The tenant's tool policy rules, an ordered list (within it the last match wins): "
    "the layer under the operator's, over every session's and piece movement's."
)


class ToolPolicyPut(BaseModel):
    """The tenant's rules, replacing the list it had."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "rules": [
                        {"tool": "Bash", "effect": "ask"},
                        {"tool": "Bash", "input": {"command": "git status*"}, "effect": "allow"},
                        {"tool": "Write", "effect": "deny", "reason": "read-only tenant"},
                    ]
                }
            ]
        },
    )

    rules: list[ToolPolicyRule] = Field(description=TENANT_POLICY)


class ToolPolicyPublic(BaseModel):
    rules: list[ToolPolicyRule] = Field(description=TENANT_POLICY)
    updated_at: datetime | None = Field(description="When they were last replaced; null: never.")


class RuleRef(BaseModel):
    """A rule by its place: its layer and its index in that layer's list."""

    layer: Layer
    index: int
    rule: ToolPolicyRule

    @classmethod
    def of(cls, mention: Mention) -> RuleRef:
        layer, index, rule = mention
        return cls(layer=layer, index=index, rule=ToolPolicyRule.of(rule))


class PolicyDecision(BaseModel):
    """What a call's policy is and which rule of which layer decided it; with no rule
    matching, the tool's default (`by_default`), and `default` says which: `allow` for
    this server's tools (`builtin`) and for a trusted MCP server's tool declaring
    `readOnlyHint` (`mcp_read_only`), `ask` for another MCP tool (`mcp_untrusted`,
    `mcp_not_read_only`) and for a tool not offered (`not_offered`)."""

    effect: Effect
    layer: Layer | None = Field(description="The deciding rule's layer; null by default.")
    index: int | None = Field(description="The deciding rule's index in its layer's list.")
    rule: ToolPolicyRule | None
    by_default: bool
    default: DefaultBy | None = Field(
        default=None, description="Which default decided; null when a rule did."
    )

    @classmethod
    def of(cls, decision: Decision) -> PolicyDecision:
        return cls(
            effect=decision.effect,
            layer=decision.layer,
            index=decision.index,
            rule=ToolPolicyRule.of(decision.rule) if decision.rule is not None else None,
            by_default=decision.by_default,
            default=decision.default,
        )


class SessionToolPublic(BaseModel):
    name: str
    description: str
    server: str | None = Field(
        default=None, description="The MCP server whose tool it is; null: a builtin tool."
    )
    policy: PolicyDecision = Field(
        description="The tool-level decision: what a call gets from the rules without "
        "`input` globs, unless one of `rules` with `input` globs matches the call."
    )
    rules: list[RuleRef] = Field(
        description="Every rule whose `tool` glob names this tool, highest layer first."
    )

    @classmethod
    def of(cls, found: SessionTool) -> SessionToolPublic:
        return cls(
            name=found.tool.name,
            description=found.tool.description,
            server=found.server,
            policy=PolicyDecision.of(found.decision),
            rules=[RuleRef.of(mention) for mention in found.mentions],
        )


class SessionToolList(BaseModel):
    data: list[SessionToolPublic] = Field(
        description="The tools the session's chat turns offer (its `tools`, else every "
        "chat tool), by the order it lists them, then its MCP servers' tools as the "
        "servers list them now (a server that cannot list them is left out)."
    )


class ToolPolicyCheck(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"tool": "Bash", "input": {"command": "git status --short"}},
                {"tool": "Write", "input": {"path": "output/a.md"}, "movement": "default/work"},
            ]
        },
    )

    tool: str = Field(
        min_length=1,
        max_length=TOOL_GLOB_MAX_CHARS,
        description="A tool of this server, or an MCP tool (`mcp__<server>__<tool>`).",
    )
    input: dict[str, Any] = Field(default_factory=dict, description="The call's input.")
    movement: str | None = Field(
        default=None,
        max_length=201,
        pattern=r"^[A-Za-z0-9_-]{1,100}/[A-Za-z0-9_-]{1,100}$",
        description="`piece/movement`: decide as in that movement of a job in this "
        "session (its rules are the lowest layer).",
    )
