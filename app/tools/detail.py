"""`Detail`: what an earlier turn said and did, by the time shown in the memory block.

One turn, let alone a range of them, can hold far more than a request may carry (tool
outputs of hundreds of kilobytes), so the answer is paged: each call shows what fits its
share of the response's result budget, and the note at the end gives the `offset` that
shows the next part.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from app.engine.tools import Tool, ToolContext, ToolError
from app.engine.truncation import page_text

DETAIL_MAX_TOKENS = 60_000
"""The page size when no budget was given (the seed's cap for one tool result)."""


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
    offset: int = Field(
        default=0,
        ge=0,
        description=(
            "Character offset to start at, to read on after an answer that was cut "
            "(its note gives the offset)."
        ),
    )


async def _detail(ctx: ToolContext, args: DetailArgs) -> str:
    if ctx.memory is None:
        raise ToolError("memory look-ups are not available here")
    text = await ctx.memory.detail(args.time)
    if args.offset and args.offset >= len(text):
        raise ToolError(
            f"offset {args.offset} is past the end of the answer ({len(text)} characters)"
        )
    budget = ctx.result_tokens if ctx.result_tokens is not None else DETAIL_MAX_TOKENS
    time = json.dumps(args.time)

    def read_on(offset: int) -> str:
        return f"To read on, call Detail with time={time} and offset={offset}."

    return page_text(text, args.offset, budget, read_on).text


def detail_tool() -> Tool[DetailArgs]:
    return Tool(
        "Detail",
        "The full record of earlier turns at a time shown in your session memory: what the "
        "user and you said, and the tool inputs, tool outputs and system messages of the "
        "turn (which the memory block leaves out). A long answer comes in parts: its last "
        "line gives the offset of the next part.",
        DetailArgs,
        _detail,
        read_on="Call Detail again with a later offset, or a narrower time.",
        read_only=True,
    )
