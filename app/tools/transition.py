"""`transition` ends a movement; `spawn_subtask` starts a child job before WAIT_SUBTASKS."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.engine.tools import PieceGateway, Tool, ToolContext, ToolError, ToolOutput

TRANSITION = "transition"
SPAWN_SUBTASK = "spawn_subtask"


class TransitionArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    next_step: str = Field(
        min_length=1,
        max_length=100,
        description="A movement name, or COMPLETE, ASK, ABORT, WAIT_SUBTASKS.",
    )
    summary: str = Field(
        min_length=1,
        max_length=20_000,
        description="What this step did; for ASK, the question for the human.",
    )
    lessons: str | None = Field(
        default=None,
        max_length=20_000,
        description="What the next step should know (constraints, pitfalls, locations).",
    )


class SpawnSubtaskArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instruction: str = Field(min_length=1, max_length=100_000)
    piece: str | None = Field(default=None, max_length=100, description="Default: `default`.")


def _gateway(ctx: ToolContext) -> PieceGateway:
    if ctx.piece is None:
        raise ToolError("there is no movement to end here")
    return ctx.piece


async def _transition(ctx: ToolContext, args: TransitionArgs) -> ToolOutput:
    text = await _gateway(ctx).transition(args.next_step, args.summary, args.lessons)
    return ToolOutput(text, ends_turn=True)


async def _spawn(ctx: ToolContext, args: SpawnSubtaskArgs) -> str:
    return await _gateway(ctx).spawn_subtask(args.instruction, args.piece)


def piece_tools() -> list[Tool[Any]]:
    return [
        Tool(
            TRANSITION,
            "End this step: name the next step (a movement, COMPLETE, ASK to ask the human "
            "a question, ABORT, or WAIT_SUBTASKS after spawn_subtask), summarize what you "
            "did, and pass lessons on to the next step.",
            TransitionArgs,
            _transition,
            in_chat=False,
        ),
        Tool(
            SPAWN_SUBTASK,
            "Start a child job with its own instruction; then end this step with "
            "transition WAIT_SUBTASKS to come back when all children have ended.",
            SpawnSubtaskArgs,
            _spawn,
            in_chat=False,
        ),
    ]
