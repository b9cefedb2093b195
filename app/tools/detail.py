"""`Detail`: what an earlier turn said and did, by the time shown in the memory block."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.engine.tools import Tool, ToolContext, ToolError


class DetailArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    time: str = Field(
        min_length=1,
        max_length=60,
        description=(
            "A time from the memory block: HH:MM:SS, HH:MM, a range HH:MM-HH:MM or "
            "HH:MM:SS-HH:MM:SS, or an ISO timestamp."
        ),
    )


async def _detail(ctx: ToolContext, args: DetailArgs) -> str:
    if ctx.memory is None:
        raise ToolError("memory look-ups are not available here")
    return await ctx.memory.detail(args.time)


def detail_tool() -> Tool[DetailArgs]:
    return Tool(
        "Detail",
        "The full record of earlier turns at a time shown in your session memory: what the "
        "user and you said, and the tool inputs, tool outputs and system messages of the "
        "turn (which the memory block leaves out).",
        DetailArgs,
        _detail,
    )
