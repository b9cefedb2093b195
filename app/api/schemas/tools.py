from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ToolPublic(BaseModel):
    name: str
    description: str
    in_chat: bool = Field(
        description="Offered to a session whose `tools` is null; the others only where a "
        "piece's movement allows them (they need a job's movement or workspace)."
    )
    input_schema: dict[str, Any] = Field(description="The JSON schema of the tool's input.")


class ToolList(BaseModel):
    data: list[ToolPublic] = Field(description="Every tool this server has, by name.")
