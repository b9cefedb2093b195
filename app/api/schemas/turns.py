from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class TurnPublic(BaseModel):
    session_id: str = Field(description="The session the turn happened in.")
    turn: int
    ended_at: datetime = Field(description="The turn's id: when it ended.")
    time: str = Field(
        description="`HH:MM:SS` in the display time zone: what the detail look-up takes."
    )
    preview: str = Field(
        description="The turn's L1 summary when it has one, else the start of the user's "
        "text (at most STRATA_TURN_PREVIEW_CHARS characters)."
    )
    reverted: bool = Field(
        default=False,
        description="A rewind took the turn back (`POST …/rewind`): the model no longer sees it.",
    )


class TurnList(BaseModel):
    data: list[TurnPublic] = Field(description="Turns, newest first.")
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )
