"""Builds the runtime pieces from settings, the same way for `serve` and `worker`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.db.engine import Database
from app.engine.anthropic import AnthropicLLM
from app.engine.llm import LLM
from app.services.live import LiveHub
from app.settings import Settings
from app.tools.clock import current_time_tool
from app.tools.detail import detail_tool
from app.tools.registry import ToolRegistry
from app.tools.tasks import task_tools
from app.worker.runner import Runner


def builtin_tools(settings: Settings) -> ToolRegistry:
    return ToolRegistry(
        [*task_tools(), detail_tool(), current_time_tool(settings.display_timezone)]
    )


@dataclass
class Runtime:
    settings: Settings
    database: Database
    llm: LLM
    tools: ToolRegistry
    hub: LiveHub
    runner: Runner | None = None


@asynccontextmanager
async def runtime(
    settings: Settings,
    *,
    with_runner: bool,
    llm: LLM | None = None,
    tools: ToolRegistry | None = None,
) -> AsyncIterator[Runtime]:
    """Database, LLM, tools, hub — and a running runner when asked for one."""
    database = Database(settings)
    owned_llm = AnthropicLLM(settings) if llm is None else None
    hub = LiveHub()
    parts = Runtime(
        settings=settings,
        database=database,
        llm=owned_llm if owned_llm is not None else llm,  # type: ignore[arg-type]
        tools=tools or builtin_tools(settings),
        hub=hub,
    )
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    if with_runner:
        parts.runner = Runner(settings, database, parts.llm, parts.tools, hub)
        task = asyncio.create_task(parts.runner.run(stop), name="strata-runner")
    try:
        yield parts
    finally:
        stop.set()
        if task is not None:
            await task
        if owned_llm is not None:
            await owned_llm.close()
        await database.dispose()
