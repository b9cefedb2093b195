"""A session's or a job's event stream as typed events, resumable where it was cut.

Generated clients do not read Server-Sent Events, but the OpenAPI document types every event
(`StreamEventData`, one model per `type`), so this small module does the rest: `stream()`
reads the SSE with `httpx-sse` on the generated client's own httpx connection pool, hands
each `data:` line to the generated model of its `type` (`ItemAppended`, `TextDelta`, ...), and
yields it with its `id`. Pass the last id you saw as `last_event_id` to resume a stream that
was cut: the server replays the durable events after it (live `text.delta` / `tool.*` ones
are not replayed). A connection that drops mid-stream is resumed that way by itself, up to
`reconnects` times. An error answer (a 404 for an unknown job, a 401 for a bad key, a 422
for a malformed id) raises `StreamProblem` with the server's problem document.

    with connect(base_url, token, timeout=60.0) as client:
        for received in stream(client, f"/jobs/{job_id}/events"):
            if isinstance(received.event, TextDelta):
                print(received.event.text, end="")

A job's stream ends once the job has ended (`stream()` returns then); a session's never does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import connect_sse
from strata_client import AuthenticatedClient, Client
from strata_client.models import (
    ActionEvent,
    CompactionFailed,
    ContextEvent,
    ItemAppended,
    JobCommentEvent,
    JobStatusEvent,
    JobSubtaskWaiting,
    McpServerStatus,
    McpToolsListed,
    MovementEnded,
    MovementStarted,
    Problem,
    SessionCompacted,
    SessionForked,
    SessionRewound,
    TaskUpdatedEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnInterrupted,
    TurnSteered,
    UsageEvent,
)

StreamEvent = (
    ItemAppended
    | JobStatusEvent
    | JobCommentEvent
    | JobSubtaskWaiting
    | MovementStarted
    | MovementEnded
    | UsageEvent
    | TaskUpdatedEvent
    | SessionCompacted
    | SessionForked
    | SessionRewound
    | CompactionFailed
    | ContextEvent
    | TextDelta
    | ToolStarted
    | ToolFinished
    | TurnInterrupted
    | TurnSteered
    | McpServerStatus
    | McpToolsListed
    | ActionEvent
)
# each event `type` of the document's StreamEventData → the generated model that reads it
MODELS: dict[str, Callable[[dict[str, Any]], StreamEvent]] = {
    "item.appended": ItemAppended.from_dict,
    "job.status": JobStatusEvent.from_dict,
    "job.comment": JobCommentEvent.from_dict,
    "job.subtask_waiting": JobSubtaskWaiting.from_dict,
    "movement.started": MovementStarted.from_dict,
    "movement.ended": MovementEnded.from_dict,
    "usage": UsageEvent.from_dict,
    "task.updated": TaskUpdatedEvent.from_dict,
    "session.compacted": SessionCompacted.from_dict,
    "session.forked": SessionForked.from_dict,
    "session.rewound": SessionRewound.from_dict,
    "compaction.failed": CompactionFailed.from_dict,
    "context.warn": ContextEvent.from_dict,
    "context.prompt": ContextEvent.from_dict,
    "context.force_transition": ContextEvent.from_dict,
    "context.exhausted": ContextEvent.from_dict,
    "turn.interrupted": TurnInterrupted.from_dict,
    "turn.steered": TurnSteered.from_dict,
    "mcp.server_status": McpServerStatus.from_dict,
    "mcp.tools_listed": McpToolsListed.from_dict,
    "action.required": ActionEvent.from_dict,
    "action.resolved": ActionEvent.from_dict,
    "text.delta": TextDelta.from_dict,
    "tool.started": ToolStarted.from_dict,
    "tool.finished": ToolFinished.from_dict,
}


class StreamProblem(Exception):
    """The server answered the stream's request with a problem document."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"HTTP {problem.status} {problem.type_}: {problem.detail}")
        self.problem = problem


@dataclass(frozen=True)
class Received:
    id: str  # where to resume from: send it back as `last_event_id`
    event: StreamEvent


def stream(
    client: AuthenticatedClient | Client,
    path: str,
    *,
    last_event_id: str | None = None,
    reconnects: int = 3,
) -> Iterator[Received]:
    """The events of `path` (`/jobs/{id}/events` or `/sessions/{id}/events`) after
    `last_event_id` (from the start without it), until the server ends the stream."""
    http = client.get_httpx_client()
    seen = last_event_id
    dropped = 0
    while True:
        headers = {"Last-Event-ID": seen} if seen else {}
        try:
            with connect_sse(http, "GET", path, headers=headers) as source:
                response = source.response
                if response.status_code == 204:  # asked past the end of an ended job
                    return
                if response.is_error:
                    response.read()
                    raise StreamProblem(Problem.from_dict(response.json()))
                for sse in source.iter_sse():
                    if not sse.data:  # a keep-alive comment (httpx-sse hands it over, empty)
                        continue
                    data = json.loads(sse.data)
                    seen = sse.id or seen
                    yield Received(sse.id, MODELS[data["type"]](data))
                return  # the server ended the stream: the job has ended
        except (httpx.RemoteProtocolError, httpx.ReadError):
            dropped += 1  # cut mid-stream: resume after the last event seen
            if dropped > reconnects:
                raise
