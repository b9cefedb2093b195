"""What a typical integration does with Strata, through the client generated from the OpenAPI
document: create a session, send a message and wait for the answer, create and update a task,
read the memory block a continuation starts with, submit a job and comment on it.

`make test` runs `run()` against a live server and the fake Messages API
(tests/clients/test_python_client.py), so this file is both a usage example and the proof that
`openapi/openapi.json` yields a working client. To run it against your own server, generate
the client next to it first (see config.yaml), then:

    python clients/python/smoke.py --base-url http://127.0.0.1:8000 --token "$STRATA_API_KEY"

(leave `--token` out for a server without keys: a plain `Client` then does). It creates
two sessions and a job on that server (and spends LLM tokens on them).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from strata_client import AuthenticatedClient, Client
from strata_client.api.chat import chat_send
from strata_client.api.jobs import jobs_comment, jobs_create, jobs_get
from strata_client.api.memory import memory_get
from strata_client.api.sessions import sessions_create
from strata_client.api.tasks import tasks_create, tasks_update
from strata_client.models import (
    CommentCreate,
    CommentPublic,
    JobCreate,
    JobPublic,
    MemoryPublic,
    MessageCreate,
    MessageReply,
    SessionCreate,
    SessionPublic,
    Task,
    TaskCreate,
    TaskPatch,
)
from strata_client.types import Response

T = TypeVar("T")

MESSAGE = "Say hello to the generated client."
TASK_SUBJECT = "Check the generated client"
JOB_INSTRUCTION = "Write a one-line status report into output/report.md."
ANSWER = "Keep it to one line."

ENDED = frozenset({"succeeded", "failed", "aborted", "cancelled"})
# a job stops moving on its own when it ends or waits for someone (a comment, its subtasks)
SETTLED = ENDED | {"waiting_human", "waiting_subtasks"}


class SmokeError(AssertionError):
    """A step got an answer other than the one it needs; the message says which and why."""


@dataclass(frozen=True)
class Outcome:
    """What each step got back, for the caller to look at (the test asserts on all of it)."""

    session: SessionPublic
    reply: MessageReply
    task: Task
    updated_task: Task
    continuation: SessionPublic
    memory: MemoryPublic
    submitted: JobPublic
    settled: JobPublic  # the job once it first stopped moving (asked, or ended)
    comment: CommentPublic
    job: JobPublic  # the job once it stopped moving again after the comment


def expect(response: Response[Any], kind: type[T], step: str) -> T:
    """The parsed body when it is a `kind`. Generated calls return the documented error body
    (a `Problem`) instead of raising, so each step checks what it got and fails with the
    status and the server's problem document, not with an AttributeError further on."""
    if isinstance(response.parsed, kind):
        return response.parsed
    body = response.content.decode(errors="replace")[:2000]
    raise SmokeError(
        f"{step}: expected {kind.__name__}, got HTTP {int(response.status_code)}: {body}"
    )


def connect(base_url: str, token: str | None, *, timeout: float) -> AuthenticatedClient | Client:
    """With a key, an `AuthenticatedClient`; a keyless (loopback) server takes a plain
    `Client`, which every generated call accepts too."""
    if token:
        return AuthenticatedClient(
            base_url=base_url,
            token=token,
            timeout=httpx.Timeout(timeout),
            raise_on_unexpected_status=True,  # a status the document does not declare is a bug
        )
    return Client(
        base_url=base_url, timeout=httpx.Timeout(timeout), raise_on_unexpected_status=True
    )


def wait_for_job(
    client: AuthenticatedClient | Client,
    job_id: str,
    until: Callable[[JobPublic], bool],
    *,
    within: float,
    poll: float,
) -> JobPublic:
    """Poll `GET /jobs/{id}` until `until(job)`: jobs run in the background, and polling is
    the simplest way a client follows one (`GET /jobs/{id}/events` streams it instead)."""
    deadline = time.monotonic() + within
    while True:
        job = expect(jobs_get.sync_detailed(job_id, client=client), JobPublic, "read the job")
        if until(job):
            return job
        if time.monotonic() > deadline:
            raise SmokeError(f"job {job_id} still {job.status} after {within} s")
        time.sleep(poll)


def run(
    base_url: str, token: str | None, *, wait_seconds: float = 120.0, poll_seconds: float = 0.2
) -> Outcome:
    """Run every step against the server at `base_url`, failing on the first wrong answer."""
    # the HTTP timeout outlasts a `wait=true` request, which the server holds up to wait_seconds
    with connect(base_url, token, timeout=wait_seconds + 10.0) as client:
        session = expect(
            sessions_create.sync_detailed(
                client=client, body=SessionCreate(title="Generated client smoke test")
            ),
            SessionPublic,
            "create a session",
        )

        # wait=true answers 200 with the reply once the turn ends, 202 if it is still going
        reply = expect(
            chat_send.sync_detailed(
                session.id,
                client=client,
                body=MessageCreate(text=MESSAGE),
                wait=True,
                timeout=wait_seconds,
            ),
            MessageReply,
            f"send a message and wait up to {wait_seconds} s for the answer",
        )
        if reply.job.status != "succeeded":
            raise SmokeError(f"the turn ended {reply.job.status}: {reply.job.error}")

        task = expect(
            tasks_create.sync_detailed(
                session.id,
                client=client,
                body=TaskCreate(subject=TASK_SUBJECT, description="Every step answers."),
            ),
            Task,
            "create a task",
        )
        updated_task = expect(
            tasks_update.sync_detailed(
                session.id, task.taskid, client=client, body=TaskPatch(status="inprogress")
            ),
            Task,
            "update the task",
        )

        # the memory block is what a continuation starts with: the predecessor chain's turns
        continuation = expect(
            sessions_create.sync_detailed(
                client=client,
                body=SessionCreate(title="Continuation", continues_from=session.id),
            ),
            SessionPublic,
            "create a continuation",
        )
        memory = expect(
            memory_get.sync_detailed(continuation.id, client=client),
            MemoryPublic,
            "read the memory block",
        )

        submitted = expect(
            jobs_create.sync_detailed(client=client, body=JobCreate(instruction=JOB_INSTRUCTION)),
            JobPublic,
            "submit a job",
        )
        settled = wait_for_job(
            client,
            submitted.id,
            lambda current: current.status in SETTLED,
            within=wait_seconds,
            poll=poll_seconds,
        )
        # a user comment answers a job that asked (ASK) and re-queues it; on a job in any
        # other state it is a note the job's later prompts show
        comment = expect(
            jobs_comment.sync_detailed(
                submitted.id, client=client, body=CommentCreate(body=ANSWER)
            ),
            CommentPublic,
            "comment on the job",
        )
        job = settled
        if settled.status == "waiting_human":
            job = wait_for_job(
                client,
                submitted.id,
                lambda current: (
                    current.status in SETTLED and current.updated_at > settled.updated_at
                ),
                within=wait_seconds,
                poll=poll_seconds,
            )
    return Outcome(
        session=session,
        reply=reply,
        task=task,
        updated_task=updated_task,
        continuation=continuation,
        memory=memory,
        submitted=submitted,
        settled=settled,
        comment=comment,
        job=job,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", default=os.environ.get("STRATA_URL", "http://127.0.0.1:8000"))
    parser.add_argument(
        "--token",
        default=os.environ.get("STRATA_API_KEY"),
        help="an API key (leave it out for a server without keys)",
    )
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for a turn")
    args = parser.parse_args()
    outcome = run(args.base_url, args.token, wait_seconds=args.wait)
    print(f"session   {outcome.session.id}: {outcome.reply.text!r}")
    print(f"task      #{outcome.updated_task.taskid} {outcome.updated_task.status}")
    print(f"memory    {outcome.memory.counts.total_turns} turn(s) in the continuation's block")
    print(f"job       {outcome.job.id}: {outcome.job.status} {outcome.job.result_text or ''}")


if __name__ == "__main__":
    main()
