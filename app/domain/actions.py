"""Pending actions: tool calls that wait for a person before the turn goes on.

A call whose policy is `ask` (`app.domain.tool_policy`) is not run when the model asks
for it: it becomes an action, and the job waits (`waiting_human`) until every action of
the response is resolved. A person allows it (it runs as asked), edits it (it runs with
the input they give), denies it (the model reads an error result with the reason) or
responds to it (the model reads the content they give, and the call never runs).

Pure: the kinds, the statuses and what a resolved action makes of its call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ActionKind(StrEnum):
    tool = "tool"
    """A tool of the server that a rule asked about: every decision resolves it."""
    client_tool = "client_tool"
    """A tool the session's client runs (`app.domain.client_tools`): only `respond`."""


class ActionStatus(StrEnum):
    pending = "pending"
    resolved = "resolved"
    expired = "expired"
    """Its `expires_in` passed: resolved by the rule's `on_timeout`."""
    cancelled = "cancelled"
    """Its job ended before anyone resolved it."""


class ActionDecision(StrEnum):
    allow = "allow"
    deny = "deny"
    edit = "edit"
    respond = "respond"


DENIED = "denied by a person"
"""The result of a call denied without a reason."""
EXPIRED = "denied: nobody answered before the action expired"
"""The result of a call whose action expired with `on_timeout: deny`."""
CANCELLED_WAITING = "cancelled: the job was cancelled while this call waited for a person"


@dataclass(frozen=True)
class Resolution:
    """What a resolved action makes of its call when the turn goes on: `run` it (with
    `input`), or answer it with `content` (an error when `is_error`) without running it.
    `started`: a run of the job began running it already (its result may be lost)."""

    run: bool
    input: dict[str, Any] | None = None
    content: str = ""
    is_error: bool = False
    started: bool = False
    action_id: str = ""


def resolution_of(
    decision: ActionDecision,
    *,
    tool_input: dict[str, Any],
    edited: dict[str, Any] | None,
    content: str | None,
    is_error: bool,
    reason: str | None,
    action_id: str,
    started: bool,
) -> Resolution:
    """The resolution a decision stored on an action makes."""
    if decision is ActionDecision.allow:
        return Resolution(True, tool_input, started=started, action_id=action_id)
    if decision is ActionDecision.edit:
        return Resolution(True, edited or {}, started=started, action_id=action_id)
    if decision is ActionDecision.respond:
        return Resolution(False, content=content or "", is_error=is_error, action_id=action_id)
    text = f"denied by a person: {reason}" if reason else DENIED
    return Resolution(False, content=text, is_error=True, action_id=action_id)


def held_call_line(tool: str, call_input: dict[str, Any], input_chars: int) -> str:
    """What a call held for a person is, on one line: its tool and its input as compact
    JSON, the input cut to `input_chars` characters (`Bash {"command": "make"}`)."""
    shown = json.dumps(call_input, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(shown) > input_chars:
        shown = shown[: max(input_chars - 1, 0)] + "…"
    return f"{tool} {shown}"
