"""People in the loop, through the generated client: a session whose tool policy asks before a
tool runs, the turn that waits for a person, the person's `allow`, and the job's event stream
followed (`events.stream()`) to the answer; and an interrupt of a running turn.

    python clients/python/people.py --base-url http://127.0.0.1:8000 --tool TaskList \\
        "What is on the task list? Use TaskList."

asks before every call of `--tool`, allows each one it is asked about, and prints the answer.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from events import stream
from smoke import SETTLED, SmokeError, connect, expect, wait_for_job
from strata_client import AuthenticatedClient, Client
from strata_client.api.chat import chat_interrupt, chat_send
from strata_client.api.jobs import jobs_resolve_action
from strata_client.api.sessions import sessions_create
from strata_client.models import (
    ActionEvent,
    ActionPublic,
    ActionResolve,
    ItemAppended,
    JobPublic,
    JobStatusEvent,
    MessageAccepted,
    MessageCreate,
    SessionCreate,
    SessionPublic,
    ToolPolicyRule,
)


@dataclass
class Approved:
    """A turn that waited for a person, and what the job's stream showed after the allow."""

    job_id: str
    waiting: JobPublic  # the job as it waited, its `required_action` listed
    resolved: list[ActionPublic] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # the types the stream carried
    status: str | None = None
    text: str = ""


def _session(client: AuthenticatedClient | Client, rules: list[ToolPolicyRule]) -> SessionPublic:
    return expect(
        sessions_create.sync_detailed(
            client=client, body=SessionCreate(title="People in the loop", tool_policy=rules)
        ),
        SessionPublic,
        "create a session",
    )


def _send(client: AuthenticatedClient | Client, session_id: str, message: str) -> str:
    accepted = expect(
        chat_send.sync_detailed(session_id, client=client, body=MessageCreate(text=message)),
        MessageAccepted,
        "send the message",
    )
    return accepted.job_id


def ask_and_allow(
    base_url: str,
    token: str | None,
    message: str,
    *,
    tool: str,
    timeout: float = 120.0,
    poll: float = 0.2,
) -> Approved:
    """Send `message` in a session whose policy asks before `tool` runs; allow each call the
    turn waits on, reading the job's events until it ends."""
    with connect(base_url, token, timeout=timeout) as client:
        rule = ToolPolicyRule(tool=tool, effect="ask", reason="a person decides")
        session = _session(client, [rule])
        job_id = _send(client, session.id, message)
        waiting = wait_for_job(
            client, job_id, lambda job: job.status in SETTLED, within=timeout, poll=poll
        )
        if waiting.status != "waiting_human" or not waiting.required_action:
            raise SmokeError(f"the turn did not wait for a person: {waiting.status}")
        approved = Approved(job_id=job_id, waiting=waiting)
        allow = ActionResolve(decision="allow")
        for action in waiting.required_action:
            approved.resolved.append(_resolve(client, job_id, action.id, allow))
        decided = {action.id for action in approved.resolved}
        # the job's stream from its start: its first wait replayed, then what came after
        for received in stream(client, f"/jobs/{job_id}/events"):
            event = received.event
            approved.events.append(event.type_)
            if (
                isinstance(event, ActionEvent)
                and event.type_ == "action.required"
                and event.id not in decided
            ):
                # a later response of the turn asked again: allow that one too
                decided.add(event.id)
                approved.resolved.append(_resolve(client, job_id, event.id, allow))
            elif isinstance(event, ItemAppended) and event.kind == "assistant_message":
                approved.text = "".join(
                    str(block["text"])
                    for block in event.item.to_dict()["content"]
                    if block["type"] == "text"
                )
            elif isinstance(event, JobStatusEvent):
                approved.status = event.status
        return approved  # the stream ended: so did the job


def _resolve(
    client: AuthenticatedClient | Client, job_id: str, action_id: str, decision: ActionResolve
) -> ActionPublic:
    return expect(
        jobs_resolve_action.sync_detailed(job_id, action_id, client=client, body=decision),
        ActionPublic,
        f"resolve action {action_id}",
    )


def interrupt_turn(
    base_url: str, token: str | None, message: str, *, timeout: float = 120.0, poll: float = 0.2
) -> JobPublic:
    """Send `message`, interrupt its turn once it runs, and answer the job once it ended."""
    with connect(base_url, token, timeout=timeout) as client:
        session = _session(client, [])
        job_id = _send(client, session.id, message)
        wait_for_job(
            client,
            job_id,
            lambda job: job.status == "running" or job.status in SETTLED,
            within=timeout,
            poll=poll,
        )
        expect(
            chat_interrupt.sync_detailed(session.id, client=client),
            JobPublic,
            "interrupt the turn",
        )
        return wait_for_job(
            client, job_id, lambda job: job.status in SETTLED, within=timeout, poll=poll
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("message")
    parser.add_argument("--tool", default="TaskList", help="the tool to ask about")
    parser.add_argument("--base-url", default=os.environ.get("STRATA_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("STRATA_API_KEY"))
    args = parser.parse_args()
    approved = ask_and_allow(args.base_url, args.token, args.message, tool=args.tool)
    for action in approved.resolved:
        print(f"allowed   {action.tool} {action.input_.to_dict()}")
    print(f"[job {approved.job_id}: {approved.status}] {approved.text}")


if __name__ == "__main__":
    main()
