from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class MemoryCounts(BaseModel):
    l2_turns: int = Field(description="Turns shown whole (of the newest 20 of the chain).")
    l1_turns: int = Field(description="Older turns shown as one-line summaries.")
    omitted_turns: int = Field(description="Older turns the budget left out of the block.")
    total_turns: int


class MemoryPublic(BaseModel):
    session_id: str = Field(description="The session answering (the merge target, if merged).")
    text: str = Field(description="The memory block; empty when there is no predecessor.")
    counts: MemoryCounts
    chain: list[str] = Field(description="The predecessor sessions, nearest first.")


class DetailEntryPublic(BaseModel):
    source_id: str
    tool_name: str | None
    text: str


class TurnDetailPublic(BaseModel):
    session_id: str = Field(description="The session the turn happened in.")
    turn: int
    ended_at: datetime
    time: str = Field(
        description="`HH:MM:SS` in the display time zone, as the memory block shows it."
    )
    user_text: str
    assistant_text: str
    l1: str | None
    details: dict[str, list[DetailEntryPublic]] = Field(
        description="L3 by kind: tool_input, tool_output, system, image."
    )


class DetailList(BaseModel):
    data: list[TurnDetailPublic] = Field(description="Matching turns, newest first.")


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    into: str = Field(min_length=1, max_length=40, description="The session that takes the turns.")
