"""Client-executed tools: tools a session's client offers the model and runs itself.

A client tool is offered to the model like any tool (its name, description and input
schema); the server never runs it. Its call becomes a pending action of kind
`client_tool` (`app.domain.actions`) that only a `respond` resolves: the client runs
the tool its own way (a file picker, a question to its user, its own backend) and sends
the result back.

Pure: the tool as a client writes it, and the checks of a session's list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.domain.errors import InvalidInput

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
"""What the Messages API takes as a tool's name."""
DESCRIPTION_MAX_CHARS = 10_000


class ClientTool(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "pick_file",
                    "description": "Ask the user to pick a file; answers its path.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"prompt": {"type": "string"}},
                    },
                }
            ]
        },
    )

    name: str = Field(
        pattern=NAME_PATTERN, description="Unique in the session; no tool of this server's."
    )
    description: str = Field(min_length=1, max_length=DESCRIPTION_MAX_CHARS)
    input_schema: dict[str, Any] = Field(
        description="A JSON Schema of an object: what the model's call gives."
    )

    @field_validator("input_schema")
    @classmethod
    def _an_object(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError('a tool\'s input is an object: "type": "object"')
        return value


def check_client_tools(
    tools: Sequence[ClientTool], builtin: Collection[str], max_tools: int
) -> list[dict[str, Any]] | None:
    """The tools as stored (null: none), or InvalidInput naming the field at fault: too
    many, a name taken by a tool of this server, or a name given twice."""
    if not tools:
        return None
    if len(tools) > max_tools:
        raise InvalidInput(
            f"client_tools: {len(tools)} tools; a session offers at most {max_tools} "
            "(STRATA_CLIENT_TOOLS_MAX)",
            field="client_tools",
        )
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        at = f"client_tools[{index}].name"
        if tool.name in builtin:
            raise InvalidInput(f"{at}: {tool.name!r} is a tool of this server", field=at)
        if tool.name in seen:
            raise InvalidInput(f"{at}: {tool.name!r} is given twice", field=at)
        seen.add(tool.name)
    return [tool.model_dump(mode="json") for tool in tools]
