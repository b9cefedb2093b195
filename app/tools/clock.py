"""`current_time`: agents misjudge dates without it, and it is harmless to offer."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict

from app.engine.tools import Tool, ToolContext


class CurrentTimeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


def current_time_tool(display_timezone: str) -> Tool[CurrentTimeInput]:
    zone = ZoneInfo(display_timezone)

    async def invoke(ctx: ToolContext, args: CurrentTimeInput) -> str:
        now = datetime.now(UTC)
        return f"{now.isoformat()} (UTC); {now.astimezone(zone).isoformat()} ({display_timezone})"

    return Tool(
        name="current_time",
        description="The current date and time, in UTC and in the server's display time zone.",
        input_model=CurrentTimeInput,
        invoke=invoke,
        read_only=True,
    )
