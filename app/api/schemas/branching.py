"""Fork and rewind: where in a session's log, and what a rewind would change."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from app.domain.tasks import Task

_POINT = (
    "`at_seq`: the log as it ended at that `seq` (0: before its first item); `at_turn`: "
    "the end of that turn; `before_turn`: just before that turn's user message, which the "
    "fork leaves out (edit and send it again). Exactly one."
)


class ForkCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"before_turn": 2, "title": "Plan B"}]}
    )

    at_seq: int | None = Field(default=None, ge=0, le=2**31 - 1, description=_POINT)
    at_turn: int | None = Field(default=None, ge=0, le=2**31 - 1)
    before_turn: int | None = Field(default=None, ge=1, le=2**31 - 1)
    title: str | None = Field(
        default=None, max_length=500, description="The fork's title; its parent's by default."
    )

    @model_validator(mode="after")
    def _one_point(self) -> ForkCreate:
        if sum(v is not None for v in (self.at_seq, self.at_turn, self.before_turn)) != 1:
            raise ValueError("give exactly one of `at_seq`, `at_turn` and `before_turn`")
        return self


class RewindCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"to_turn": 1}]})

    to_seq: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="The log as it ended at that `seq`, reverted items' too: a rewind to the "
        "`from_seq` of the last rewind undoes it. Exactly one of `to_seq` and `to_turn`.",
    )
    to_turn: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="The end of that turn (0: the start)."
    )
    files: StrictBool = Field(
        default=False,
        description="Also restore the session's job workspace to its snapshot at the point "
        "(what Bash changed and deleted included), after a safety snapshot of it as it is: "
        "a rewind to `from_seq` with `files: true` undoes both.",
    )

    @model_validator(mode="after")
    def _one_point(self) -> RewindCreate:
        if (self.to_seq is None) == (self.to_turn is None):
            raise ValueError("give exactly one of `to_seq` and `to_turn`")
        return self


class WorkspaceChangesPublic(BaseModel):
    """What restoring a job's workspace to a snapshot changes (folders end with `/`)."""

    job_id: str = Field(description="The job whose workspace it is.")
    snapshot_seq: int = Field(description="The log's end the snapshot was taken at.")
    added: list[str] = Field(description="Paths the restore creates.")
    changed: list[str] = Field(description="Paths whose content, mode or link it restores.")
    deleted: list[str] = Field(description="Paths it removes (made after the point).")


class RewindPublic(BaseModel):
    seq: int = Field(description="The `rewind` item's seq.")
    to_seq: int
    from_seq: int = Field(description="The log's end before it: rewind to it to undo.")
    segment: int = Field(description="The segment the session continues in.")
    workspace: WorkspaceChangesPublic | None = Field(
        default=None, description="With `files: true`: what the restore changed."
    )


class RewindPreviewPublic(BaseModel):
    to_seq: int
    from_seq: int
    reverted_turns: list[int] = Field(description="Turns the model would no longer see.")
    restored_turns: list[int] = Field(description="Reverted turns it would see again.")
    tasks_before: list[Task]
    tasks_after: list[Task] = Field(description="The task list the rewind would leave.")
    files: list[str] = Field(description="Files (`fil_…`) the reverted items attach.")
    workspace: WorkspaceChangesPublic | None = Field(
        default=None, description="With `files=true`: what the restore would change."
    )
