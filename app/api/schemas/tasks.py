from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.domain.tasks import Task, TaskStatus


class TaskCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"subject": "Draft the changelog", "description": "From the merged pull requests."}
            ]
        },
    )

    subject: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=20_000)


def _at_least_one_change(schema: dict[str, Any]) -> None:
    """As the server reads it: each field is left out or given a value (never null), and at
    least one is given."""
    for prop in schema.get("properties", {}).values():
        options = prop.pop("anyOf", None)
        if options:
            prop.update(next(o for o in options if o.get("type") != "null"))
        prop.pop("default", None)
    schema["minProperties"] = 1
    schema["examples"] = [{"status": "inprogress"}]


class TaskPatch(BaseModel):
    """At least one field; `status=deleted` deletes (the task stays listed)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_at_least_one_change)

    status: TaskStatus | None = None
    subject: str | None = Field(default=None, min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=20_000)

    @field_validator("status", "subject", "description", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:  # a default is not validated: only a null that was sent gets here
            raise ValueError("leave the field out to keep it; null is not a value")
        return value

    @model_validator(mode="after")
    def _changes_something(self) -> TaskPatch:
        if self.status is None and self.subject is None and self.description is None:
            raise ValueError("give at least one of status, subject, description")
        return self


class TaskList(BaseModel):
    data: list[Task]


__all__ = ["Task", "TaskCreate", "TaskList", "TaskPatch"]
