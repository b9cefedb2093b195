"""Pending actions as the API shows and takes them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.db.models import JobAction
from app.domain.actions import ActionDecision, ActionKind, ActionStatus
from app.domain.tool_policy import Layer, ToolPolicyRule
from app.services.actions import ActionChoice


class AskingRule(BaseModel):
    """The rule that asked: its layer, its place in that layer's list, and the rule."""

    layer: Layer
    index: int
    rule: ToolPolicyRule


class ActionPublic(BaseModel):
    id: str = Field(description="`act_…`")
    job_id: str
    session_id: str
    tool_use_id: str = Field(description="The model's call this action holds.")
    tool: str
    input: dict[str, Any] = Field(description="The input the model gave the call.")
    kind: ActionKind = Field(
        description="`tool`: a tool of this server a rule asked about; `client_tool`: a "
        "tool of the session's client, which only `respond` answers."
    )
    rule: AskingRule | None = Field(description="The rule that asked; null: the tool's default.")
    status: ActionStatus
    decision: ActionDecision | None
    decided_input: dict[str, Any] | None = Field(description="`edit`: the input it runs with.")
    content: str | None = Field(
        description="`respond`: the result the model reads; `deny` by expiry: why."
    )
    is_error: bool
    reason: str | None
    on_timeout: Literal["deny", "cancel"] | None = Field(
        description="What the action becomes at `expires_at` (null: it never expires)."
    )
    created_at: datetime
    expires_at: datetime | None
    resolved_at: datetime | None

    @classmethod
    def of(cls, row: JobAction) -> ActionPublic:
        rule = None
        if row.layer is not None and row.rule is not None:
            rule = AskingRule(
                layer=Layer(row.layer),
                index=row.rule_index or 0,
                rule=ToolPolicyRule.model_validate(row.rule),
            )
        return cls(
            id=row.id,
            job_id=row.job_id,
            session_id=row.session_id,
            tool_use_id=row.tool_use_id,
            tool=row.tool,
            input=row.input,
            kind=ActionKind(row.kind),
            rule=rule,
            status=ActionStatus(row.status),
            decision=ActionDecision(row.decision) if row.decision else None,
            decided_input=row.decided_input,
            content=row.content,
            is_error=row.is_error,
            reason=row.reason,
            on_timeout=row.on_timeout,
            created_at=row.created_at,
            expires_at=row.expires_at,
            resolved_at=row.resolved_at,
        )


class ActionList(BaseModel):
    data: list[ActionPublic]


class ActionPage(BaseModel):
    data: list[ActionPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )


class ActionResolve(BaseModel):
    """A decision on one action."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"decision": "allow"},
                {"decision": "deny", "reason": "not on the main branch"},
                {"decision": "edit", "input": {"command": "git status"}},
                {"decision": "respond", "content": "The file says 42."},
            ]
        },
    )

    decision: ActionDecision = Field(
        description="`allow` runs the call as asked, `edit` runs it with `input`, `deny` "
        "answers the model an error with `reason`, `respond` answers it `content` and "
        "never runs the call."
    )
    input: dict[str, Any] | None = Field(
        default=None,
        description="`edit` only: the call's new input, checked against the tool's input "
        "schema (422 before anything resumes).",
    )
    content: str | None = Field(
        default=None, max_length=1_000_000, description="`respond` only: the call's result."
    )
    is_error: StrictBool = Field(default=False, description="`respond`: the result is an error.")
    reason: str | None = Field(default=None, max_length=1000)
    remember: Literal["session", "tenant"] | None = Field(
        default=None,
        description="`allow` or `deny` only: append the rule the decision makes (the asking "
        "rule's tool and input globs, with this effect) to the session's or the tenant's "
        "tool policy, so later calls like it are decided without asking.",
    )

    def choice(self, action_id: str) -> ActionChoice:
        return ActionChoice(
            action_id=action_id,
            decision=self.decision,
            input=self.input,
            content=self.content,
            is_error=self.is_error,
            reason=self.reason,
            remember=self.remember,
        )


class ActionResolveItem(ActionResolve):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"id": "act_0123456789abcdef", "decision": "allow"}]},
    )

    id: str = Field(max_length=40, description="The action (`act_…`).")


class ActionBatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "actions": [
                        {"id": "act_0123456789abcdef", "decision": "allow"},
                        {"id": "act_fedcba9876543210", "decision": "deny", "reason": "no"},
                    ]
                }
            ]
        },
    )

    actions: list[ActionResolveItem] = Field(min_length=1, max_length=100)
