from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    """As the server reads it: a field sent as null is a field left out, and one must stay."""
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

    @model_validator(mode="after")
    def _changes_something(self) -> TaskPatch:
        if self.status is None and self.subject is None and self.description is None:
            raise ValueError("give at least one of status, subject, description")
        return self


class TaskList(BaseModel):
    data: list[Task]


__all__ = ["Task", "TaskCreate", "TaskList", "TaskPatch"]
