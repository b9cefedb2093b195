from __future__ import annotations

from datetime import datetime
from typing import Literal

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
    is_error: bool = Field(description="A tool output of a call that failed.")
    text: str = Field(
        description="The entry's text on this page (with `grep`: its lines that match)."
    )
    offset: int = Field(description="Where `text` starts in the entry's whole text.")
    length: int | None = Field(
        description="The whole text's length when this page holds only a part of it."
    )


class TurnDetailPublic(BaseModel):
    session_id: str = Field(description="The session the turn happened in.")
    turn: int
    ended_at: datetime
    time: str = Field(
        description="`HH:MM:SS` in the display time zone, as the memory block shows it."
    )
    user_text: str = Field(description="The user's text on this page (empty if not on it).")
    assistant_text: str = Field(description="The assistant's text on this page.")
    l1: str | None
    details: dict[str, list[DetailEntryPublic]] = Field(
        description="L3 by kind: tool_input, tool_output, system, image."
    )
    reverted: bool = Field(
        default=False,
        description="A rewind took the turn back (`POST …/rewind`): the model no longer sees it.",
    )


class DetailList(BaseModel):
    data: list[TurnDetailPublic] = Field(
        description="The turns on this page, newest first, each with only its parts on the page."
    )
    text: str = Field(description="This page as text, at most `max_chars` characters.")
    page: int
    pages: int = Field(description="How many pages the look-up has (with these filters).")
    next_page: int | None = Field(description="The page to ask for next; null on the last.")
    matched_turns: int = Field(description="Turns with something left after the filters.")
    total_chars: int = Field(description="The characters of every page together.")


class MergeRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"into": "ses_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"}]}
    )

    into: str = Field(
        max_length=40,
        pattern=r"^ses_[0-9A-HJKMNP-TV-Z]{26}$",
        description="The session that takes the turns.",
    )


class SearchHitPublic(BaseModel):
    time: str = Field(
        description="When the turn ended, `YYYY-MM-DD HH:MM:SS` in the display time zone: "
        "what the detail look-up takes."
    )
    ended_at: datetime
    session_id: str = Field(description="The session the turn happened in.")
    turn: int = Field(description="The turn's number in that session.")
    layer: Literal["L1", "L2", "L3"] = Field(
        description="Where the words were found: L1 the turn's summary, L2 the user's and "
        "the assistant's text, L3 a tool input or output or a system message."
    )
    line: str = Field(description="The line that matched best, `[source]: text`, cut around it.")


class SearchList(BaseModel):
    data: list[SearchHitPublic] = Field(description="The hits, best first.")
