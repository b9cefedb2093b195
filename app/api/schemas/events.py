"""What the two event streams send: one schema per event `type`, a union on `type`.

These models document the wire (the OpenAPI document and generated clients); the stream
itself sends the recorded data as it is (`app.services.streams`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas.actions import ActionPublic
from app.api.schemas.items import ItemKind, ItemPublic
from app.domain.jobs import JobKind, JobStatus


class _Event(BaseModel):
    session_id: str
    job_id: str | None


class _JobEvent(_Event):
    job_id: str


class ItemAppended(_Event):
    type: Literal["item.appended"]
    job_id: str | None = Field(None, description="The job whose turn appended it, if any.")
    seq: int
    kind: ItemKind
    item: ItemPublic


class JobStatusEvent(_JobEvent):
    """The same fields as the `job.<status>` webhooks' `data`."""

    type: Literal["job.status"]
    status: JobStatus
    kind: JobKind
    piece: str | None = Field(description="The piece a `piece` job runs; null for other kinds.")
    turn: int | None
    attempt: int
    parent_job_id: str | None
    error: dict[str, Any] | None = Field(description="The problem, once the job failed.")


class JobCommentEvent(_JobEvent):
    type: Literal["job.comment"]
    comment_id: int
    author: str


class JobSubtaskWaiting(_JobEvent):
    """On every job above a subtask that asks a human; a comment on the child answers it."""

    type: Literal["job.subtask_waiting"]
    child_job_id: str
    movement: str | None
    question: str


class _MovementEvent(_JobEvent):
    piece: str | None = Field(description="The piece the job runs.")
    movement: str
    attempt: int = Field(description="The job's attempt (claims so far) that ran it.")


class MovementStarted(_MovementEvent):
    """The same fields as the `movement.started` webhook's `data`. A movement resumed
    from the log after a runner died is not started again."""

    type: Literal["movement.started"]
    number: int = Field(description="How many movements the job has begun, this one included.")


class MovementEnded(_MovementEvent):
    """The same fields as the `movement.ended` webhook's `data`: the movement transitioned.
    A job that stops inside a movement (failed, cancelled) says so by its `job.status`."""

    type: Literal["movement.ended"]
    next_step: str = Field(description="A movement, or COMPLETE, ASK, ABORT, WAIT_SUBTASKS.")
    forced: bool = Field(
        description="The model did not call `transition` itself (the context ran out, or "
        "it never called it)."
    )


class UsageEvent(_JobEvent):
    type: Literal["usage"]
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


class TaskUpdatedEvent(_Event):
    """The same fields as the `task.updated` webhook's `data`."""

    type: Literal["task.updated"]
    job_id: str | None = Field(description="The job whose agent changed it (origin `llm`).")
    taskid: int
    op: Literal["TaskCreate", "TaskUpdate"]
    origin: Literal["llm", "api"]
    status: str
    subject: str


class TurnInterrupted(_JobEvent):
    """The same fields as the `turn.interrupted` webhook's `data`: the user interrupted
    the job's turn; its `job.status` says `cancelled` with `error.type` `interrupted`."""

    type: Literal["turn.interrupted"]
    turn: int | None


class TurnSteered(_JobEvent):
    """The same fields as the `turn.steered` webhook's `data`: the job's running turn took
    a steer (`POST …/messages?if_busy=steer`), whose user item is at `seq`."""

    type: Literal["turn.steered"]
    turn: int | None
    steer_job_id: str
    seq: int


class SessionForked(_Event):
    """The same fields as the `session.forked` webhook's `data`, on the parent's stream: a
    fork (`POST …/fork`) reads this session's log up to `at_seq`."""

    type: Literal["session.forked"]
    job_id: None = None
    forked_session_id: str
    at_seq: int
    turn: int = Field(description="The turn the fork's log ends in.")


class SessionRewound(_Event):
    """The same fields as the `session.rewound` webhook's `data`: the session went back to
    its log as it ended at `to_seq`; the `rewind` item is at `seq`."""

    type: Literal["session.rewound"]
    job_id: None = None
    seq: int
    to_seq: int
    from_seq: int = Field(description="The log's end before the rewind (rewind to it: undo).")
    segment: int
    files: bool = Field(
        default=False, description="Whether it restored the job's workspace too (`files: true`)."
    )


class SessionCompacted(_Event):
    type: Literal["session.compacted"]
    job_id: str | None
    segment: int
    summarized_items: int
    tasks: int


class CompactionFailed(_Event):
    type: Literal["compaction.failed"]
    job_id: str | None
    segment: int


class ContextEvent(_JobEvent):
    type: Literal["context.warn", "context.prompt", "context.force_transition", "context.exhausted"]
    movement: str
    ratio: float = Field(description="Context used, as a share of the window.")


class TextDelta(_JobEvent):
    """Live only (never replayed): text of the answer being written."""

    type: Literal["text.delta"]
    index: int = Field(description="The content block of the LLM response it belongs to.")
    text: str


class ToolStarted(_JobEvent):
    """Live only: a tool call began."""

    type: Literal["tool.started"]
    tool_use_id: str
    name: str


class ToolFinished(_JobEvent):
    """Live only: a tool call ended."""

    type: Literal["tool.finished"]
    tool_use_id: str
    name: str
    is_error: bool


class McpServerStatus(_JobEvent):
    """Live only: an MCP server's state changed for this job (`ok`, or what failed)."""

    type: Literal["mcp.server_status"]
    server: str
    state: str = Field(
        description="`ok`, `unreachable`, `auth-failed`, `timeout`, `crashed` or `protocol-error`."
    )
    detail: str


class McpListedTool(BaseModel):
    name: str = Field(description="The model's name of it: `mcp__<server>__<tool>`.")
    server: str
    tool: str = Field(description="The server's own name of it.")
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = Field(description="Its hints, such as `read_only_hint`.")


class McpToolsListed(_JobEvent):
    """The tools of the attached MCP servers as a segment's first turn listed them: every
    later turn of the segment offers these (never sent to the model as text)."""

    type: Literal["mcp.tools_listed"]
    segment: int
    attachments: list[dict[str, Any]] = Field(description="The attachments listed.")
    tools: list[McpListedTool]


class ActionEvent(ActionPublic):
    """The same fields as the `action.required` / `action.resolved` webhooks' `data`: a tool
    call of the job that waits for a person (`required`), and once it was decided, expired
    or cancelled (`resolved`)."""

    type: Literal["action.required", "action.resolved"]


StreamEventData = Annotated[
    ItemAppended
    | JobStatusEvent
    | JobCommentEvent
    | JobSubtaskWaiting
    | MovementStarted
    | MovementEnded
    | UsageEvent
    | TaskUpdatedEvent
    | TurnInterrupted
    | TurnSteered
    | SessionForked
    | SessionRewound
    | SessionCompacted
    | CompactionFailed
    | ContextEvent
    | TextDelta
    | ToolStarted
    | ToolFinished
    | McpServerStatus
    | McpToolsListed
    | ActionEvent,
    Field(discriminator="type"),
]

STREAM_DESCRIPTION = """\
Server-Sent Events. Each event's `event:` is its type, its `id:` the position to resume
from (send it back as `Last-Event-ID`), its `data:` one JSON object (`StreamEventData`)
with `type`, `session_id` and `job_id` (null when it concerns no job):

| type | data | replayed |
| --- | --- | --- |
| `item.appended` | `seq`, `kind`, `item` (the log item) | yes |
| `job.status` | `status`, `kind`, `piece`, `turn`, `attempt`, `parent_job_id`, `error` (1) | yes |
| `job.comment` | `comment_id`, `author` | yes |
| `job.subtask_waiting` | `child_job_id`, `movement`, `question` of a subtask asking a human | yes |
| `movement.started` | `piece`, `movement`, `attempt`, `number` (3) | yes |
| `movement.ended` | `piece`, `movement`, `attempt`, `next_step`, `forced` (3) | yes |
| `usage` | the tokens of one LLM response | yes |
| `task.updated` | `taskid`, `op`, `origin`, `status`, `subject` (2) | yes |
| `turn.interrupted` | `turn` (3) | yes |
| `turn.steered` | `turn`, `steer_job_id`, `seq` (3) | yes |
| `session.forked` | `forked_session_id`, `at_seq`, `turn` (3), on the parent's stream | yes |
| `session.rewound` | `seq`, `to_seq`, `from_seq`, `segment`, `files` (3) | yes |
| `session.compacted` / `compaction.failed` | `segment`, … | yes |
| `context.warn` / `.prompt` / `.force_transition` / `.exhausted` | `movement`, `ratio` | yes |
| `text.delta` | `index` (content block), `text` | no: live only |
| `tool.started` / `tool.finished` | `tool_use_id`, `name` (`is_error`) | no: live only |
| `mcp.server_status` | `server`, `state` (`ok` or what failed), `detail` | no: live only |
| `mcp.tools_listed` | `segment`, `attachments`, `tools` a segment's turns offer | yes |

(1) the `data` of the `job.<status>` webhooks; (2) the `data` of the `task.updated`
webhook; (3) the `data` of the webhook of the same name. A comment line (`: keep-alive`)
is sent after STRATA_SSE_KEEPALIVE_SECONDS without an event. Live events have ids `N.M`
(the M-th after durable event N); reconnecting with any id replays the durable events
after N. The stream asks again every
STRATA_SSE_KEY_CHECK_SECONDS whether its key is valid: one revoked or expired since ends it
(reconnecting with it is a 401)."""

# named schemas the document gets beside the routes' own (app.api.openapi)
STREAM_SCHEMAS: dict[str, Any] = {
    "StreamEventData": StreamEventData,
}


def stream_responses() -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "description": "The event stream (`text/event-stream`); each `data:` line is "
            "one `StreamEventData` object.",
            "content": {
                # the union of the event objects each `data:` line holds: what 3.1 tools
                # and generators read as the stream's type (a client parses the frames)
                "text/event-stream": {
                    "schema": {"$ref": "#/components/schemas/StreamEventData"},
                },
            },
        }
    }
