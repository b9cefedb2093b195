"""Tools the tests offer to the agent: small, typed, each with one clear behaviour."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from app.engine.tools import Tool, ToolContext, ToolError, ToolRegistry
from app.tools.tasks import task_tools


class EchoInput(BaseModel):
    text: str


class RepeatInput(BaseModel):
    text: str
    times: int


class AddInput(BaseModel):
    a: int
    b: int


class SlowInput(BaseModel):
    seconds: float


class Empty(BaseModel):
    pass


async def _echo(ctx: ToolContext, args: EchoInput) -> str:
    return args.text


async def _repeat(ctx: ToolContext, args: RepeatInput) -> str:
    return args.text * args.times


async def _add(ctx: ToolContext, args: AddInput) -> str:
    return str(args.a + args.b)


async def _slow(ctx: ToolContext, args: SlowInput) -> str:
    await asyncio.sleep(args.seconds)
    return f"slept {args.seconds}s"


async def _boom(ctx: ToolContext, args: Empty) -> str:
    raise RuntimeError("the disk is on fire")


async def _refuse(ctx: ToolContext, args: Empty) -> str:
    raise ToolError("not allowed here")


def agent_tools() -> ToolRegistry:
    return ToolRegistry(
        [
            *task_tools(),
            Tool("echo", "Repeat the text.", EchoInput, _echo),
            Tool("repeat", "Repeat the text `times` times.", RepeatInput, _repeat),
            Tool("add", "Add two integers.", AddInput, _add),
            Tool("slow", "Sleep, then answer.", SlowInput, _slow),
            Tool("boom", "Always crashes.", Empty, _boom),
            Tool("refuse", "Always refuses.", Empty, _refuse),
        ]
    )
