from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from app.api.schemas.actions import ActionPublic
from app.api.schemas.files import CONTENT_DESCRIPTION, ContentPart
from app.api.schemas.sessions import McpAttachment, usage_of
from app.db.models import Job, JobAction
from app.domain.client_tools import ClientTool
from app.domain.jobs import JobKind, JobStatus
from app.domain.usage import Usage
from app.services.jobs import WaitingChild

__all__ = ["JobKind", "JobStatus"]


class JobError(BaseModel):
    """A problem document (RFC 9457) naming why the job failed."""

    type: str
    title: str
    detail: str


class WaitingSubtask(BaseModel):
    """A subtask (at any depth) waiting for a human: answer what it asked with a comment on
    it, its held tool calls with `POST /jobs/{job_id}/actions/{action_id}`."""

    job_id: str
    movement: str | None
    question: str = Field(
        description="What it asked; held on tool calls: those calls, each its tool and input "
        '(`Bash {"command": "make"}`, joined by `; `).'
    )


JOB_MCP_DESCRIPTION = (
    "MCP servers whose tools every movement of the job is offered (within each one's "
    "`tools` globs), besides its session's that a movement's `allowed_tools` names by glob "
    "(`mcp__git__*`); checked as a session's are (see docs/mcp.md). Its subtasks have "
    "them too."
)


class JobPublic(BaseModel):
    id: str
    session_id: str
    kind: JobKind = Field(description="Which handler runs it; only `piece` jobs name a piece.")
    piece: str | None = Field(description="The piece a `piece` job runs; null for other kinds.")
    status: JobStatus
    turn: int | None
    instruction: str | None
    movement: str | None = Field(description="The movement running, or to resume at.")
    lessons: list[str] = Field(description="Lessons handed on between movements so far.")
    parent_job_id: str | None
    waiting_on: list[WaitingSubtask] = Field(
        description="While `waiting_subtasks`: the subtasks waiting for a human, with their "
        "questions."
    )
    required_action: list[ActionPublic] = Field(
        default_factory=list,
        description="While `waiting_human` on tool calls: the pending actions to resolve "
        "(`POST /jobs/{job_id}/actions/{action_id}`).",
    )
    error: JobError | None
    result_text: str | None = Field(description="The assistant's final text, once succeeded.")
    mcp: list[McpAttachment] = Field(default_factory=list, description=JOB_MCP_DESCRIPTION)
    usage: Usage
    attempts: int = Field(description="How many times a runner claimed it (>1 after a resume).")
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime

    @classmethod
    def of(
        cls,
        row: Job,
        waiting: Sequence[WaitingChild] = (),
        actions: Sequence[JobAction] = (),
    ) -> JobPublic:
        return cls(
            id=row.id,
            session_id=row.session_id,
            kind=JobKind(row.kind),
            piece=row.piece,
            status=JobStatus(row.status),
            turn=row.turn,
            instruction=row.instruction,
            movement=row.movement,
            lessons=[
                f"({entry['movement']}) {entry['text']}" for entry in row.state.get("lessons", [])
            ],
            parent_job_id=row.parent_job_id,
            waiting_on=[
                WaitingSubtask(job_id=w.job_id, movement=w.movement, question=w.question)
                for w in waiting
            ],
            required_action=[ActionPublic.of(action) for action in actions],
            error=JobError.model_validate(row.error) if row.error else None,
            result_text=(row.result or {}).get("text"),
            mcp=[McpAttachment.model_validate(a) for a in (row.input or {}).get("mcp") or ()],
            usage=usage_of(row),
            attempts=row.attempts,
            cancel_requested=row.cancel_requested,
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            updated_at=row.updated_at,
        )


class JobList(BaseModel):
    data: list[JobPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )


class MessageCreate(BaseModel):
    """The user's message: `text`, or `content` parts that may attach stored files."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": "What changed in the last release?"},
                {
                    "content": [
                        {"type": "text", "text": "What does this plan show?"},
                        {"type": "image", "file_id": "fil_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"},
                    ]
                },
            ]
        },
    )

    text: str | None = Field(default=None, min_length=1, max_length=1_000_000)
    content: list[ContentPart] | None = Field(
        default=None, min_length=1, max_length=100, description=CONTENT_DESCRIPTION
    )
    client_tools: list[ClientTool] = Field(
        default_factory=list,
        description="Tools the client offers the model for this message's turn only, after "
        "the session's `client_tools` (one of the same name is replaced for the turn); a "
        "call waits as an action of kind `client_tool` that `respond` answers. A name of "
        "this server's tools is a 422, and so is any with `if_busy=steer` (a steer joins "
        "a turn whose tools are set).",
    )

    @model_validator(mode="after")
    def _text_or_content(self) -> MessageCreate:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of `text` and `content`")
        return self


class MessageAccepted(BaseModel):
    """The turn is queued or running: follow it at `/jobs/{job_id}` or its events."""

    job_id: str
    turn: int | None
    job: JobPublic


class MessageReply(BaseModel):
    """The turn ended while the request waited."""

    job_id: str
    turn: int | None
    text: str | None
    job: JobPublic


class JobFile(BaseModel):
    """A stored file (`POST /files`) the job finds in its `input/` folder."""

    model_config = ConfigDict(extra="forbid")

    file_id: str = Field(max_length=40, description="A file of the tenant (`fil_…`).")
    path: str = Field(
        min_length=1,
        max_length=1000,
        description="Where it goes, relative to `input/`: segments joined by `/`, none empty, "
        "`.` or `..`, with no backslash, NUL or percent-encoded (`%XX`) text, and not under "
        "`subtasks/`.",
    )


class JobCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "instruction": "Write a one-line status report into output/report.md.",
                    "piece": "default",
                }
            ]
        },
    )

    instruction: str = Field(min_length=1, max_length=200_000)
    piece: str = Field(default="default", min_length=1, max_length=100)
    session_id: str | None = Field(
        default=None,
        max_length=40,
        description="Run in this session (in segments of the job's own: the session's chat "
        "context is left as it was); by default a new one.",
    )
    start: StrictBool = Field(
        default=True,
        description="false: create a `draft` that takes files and comments and never runs "
        "until `POST /jobs/{job_id}/start`.",
    )
    client_tools: list[ClientTool] = Field(
        default_factory=list,
        description="Tools the client offers the model in each of the job's movements (not "
        "its subtasks') and runs itself: a call waits as an action of kind `client_tool` "
        "that `respond` answers. A name of this server's tools is a 422.",
    )
    mcp: list[McpAttachment] = Field(
        default_factory=list, max_length=20, description=JOB_MCP_DESCRIPTION
    )
    files: list[JobFile] = Field(
        default_factory=list,
        description="Stored files copied into the job's `input/` folder before it can run, "
        "at most STRATA_JOB_FILES_MAX_COUNT of them holding STRATA_JOB_FILES_MAX_BYTES "
        "together. A bad path, two entries with one path, or a file id the tenant does not "
        "have is a 422 naming the entry (`files[2].path`).",
    )


class CommentCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"body": "Plain text, please."}]}
    )

    body: str = Field(min_length=1, max_length=100_000)


class CommentPublic(BaseModel):
    id: int
    job_id: str
    author: Literal["user", "agent", "system"]
    body: str
    created_at: datetime


class CommentList(BaseModel):
    data: list[CommentPublic]


class WorkspaceFiles(BaseModel):
    input: list[str]
    output: list[str]


class StoredFile(BaseModel):
    path: str
    size: int
