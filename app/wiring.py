"""Builds the runtime pieces from settings, the same way for `serve` and `worker`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import assert_never

from app.db import signals
from app.db.engine import Database
from app.domain.tool_policy import RuleBounds, ToolRule
from app.engine.anthropic import AnthropicLLM
from app.engine.llm import LLM
from app.engine.media import MediaLLM
from app.engine.pieces import BUILTIN_DIR, PieceCatalog, load_catalog
from app.engine.tools import ToolRegistry
from app.observability.metered_llm import MeteredLLM
from app.services.files import FileContents, FilesApiUploads
from app.services.live import LiveHub, run_clock
from app.services.live_bridge import PgLiveBridge
from app.services.mcp_attach import operator_servers
from app.services.tool_policy import load_operator_rules
from app.settings import Settings
from app.tools.clock import current_time_tool
from app.tools.detail import detail_tool
from app.tools.tasks import task_tools
from app.tools.transition import piece_tools
from app.tools.workspace import (
    WORKSPACE_TOOL_NAMES,
    Confinement,
    ResultBudget,
    workspace_tools,
)
from app.worker.runner import Runner
from app.worker.webhooks import WebhookDispatcher

logger = logging.getLogger("strata")


def builtin_tools(settings: Settings) -> ToolRegistry:
    workspace = workspace_tools(
        bash_enabled=settings.bash_tool_enabled,
        bash_timeout_seconds=settings.bash_timeout_seconds,
        budget=ResultBudget(
            ratio=settings.tool_result_budget_ratio,
            max_tokens=settings.tool_result_max_tokens,
            min_tokens=settings.tool_result_min_tokens,
        ),
        confinement=Confinement.of(settings),
    )
    return ToolRegistry(
        [
            *task_tools(),
            detail_tool(),
            current_time_tool(settings.display_timezone),
            *piece_tools(),
            *(replace(tool, in_chat=False) for tool in workspace),
        ]
    )


def known_tool_names(settings: Settings, tools: ToolRegistry) -> set[str]:
    """What a movement may name in `allowed_tools`: every tool of this server and every
    builtin one, Bash included even when it is off (a movement allowing it then simply
    runs without it)."""
    return {*tools.names, *builtin_tools(settings).names, *WORKSPACE_TOOL_NAMES}


def operator_policy(settings: Settings, tools: ToolRegistry) -> tuple[ToolRule, ...]:
    """The operator's tool policy rules (`STRATA_TOOL_POLICY_FILE`), checked against the
    tools a movement may name; ToolPolicyFileError names the rule at fault."""
    bounds = RuleBounds(known_tool_names(settings, tools), settings.tool_policy_max_rules)
    return load_operator_rules(settings.tool_policy_file, bounds)


def piece_catalog(settings: Settings, tools: ToolRegistry) -> PieceCatalog:
    """The builtin pieces, then the operator's folder (same name: the folder wins)."""
    folders = [BUILTIN_DIR] + ([settings.pieces_dir] if settings.pieces_dir else [])
    catalog = load_catalog(
        folders, known_tool_names(settings, tools), settings.tool_policy_max_rules
    )
    for problem in catalog.problems:
        where = f"{problem.folder}/{problem.file}" if problem.file else problem.folder
        if problem.line is not None:
            where = f"{where}:{problem.line}"
        logger.error("piece file %s is invalid and was skipped: %s", where, problem.reason)
    return catalog


@dataclass
class Runtime:
    settings: Settings
    database: Database
    llm: LLM
    tools: ToolRegistry
    hub: LiveHub
    pieces: PieceCatalog
    operator_policy: tuple[ToolRule, ...] = ()
    runner: Runner | None = None
    dispatcher: WebhookDispatcher | None = None

    def signal(self, signal: signals.Signal) -> None:
        """Where the after-commit signals of this process's units of work go."""
        match signal:
            case signals.Notify(session_id=session_id, job_id=job_id, ended=ended):
                self.hub.committed(session_id, job_id, ended=ended)
            case signals.WakeRunner():
                if self.runner is not None:
                    self.runner.wake()
            case signals.WakeDispatcher():
                if self.dispatcher is not None:
                    self.dispatcher.wake()
            case signals.CancelJob(job_id=job_id):
                if self.runner is not None:
                    self.runner.cancel(job_id)
                self.hub.cancel(job_id)  # the runners of other processes
            case signals.Forget() | signals.Keep():
                pass  # the Database applied it to its caches at the commit
            case _:
                assert_never(signal)


@asynccontextmanager
async def runtime(
    settings: Settings,
    *,
    with_runner: bool,
    llm: LLM | None = None,
    tools: ToolRegistry | None = None,
) -> AsyncIterator[Runtime]:
    """Database, LLM, tools, hub — and a running runner and webhook dispatcher when asked."""
    registry = tools or builtin_tools(settings)
    operator_rules = operator_policy(settings, registry)  # a bad file: nothing starts
    operator_servers(settings)  # STRATA_MCP_SERVERS_FILE too
    database = Database(settings)
    owned_llm = AnthropicLLM(settings) if llm is None else None
    if owned_llm is not None and not owned_llm.configured:
        # every process that would call the LLM says so once: the API's and each worker's
        logger.warning(
            "no LLM is configured: agent turns will fail with llm-not-configured; "
            "set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL) and restart"
        )
    hub = LiveHub()
    parts = Runtime(
        settings=settings,
        database=database,
        # requests carry the stored files their messages name (`app.engine.media`)
        llm=MediaLLM(
            MeteredLLM(
                owned_llm if owned_llm is not None else llm,  # type: ignore[arg-type]
                settings.step_gap_jobs,
            ),
            FileContents(database, settings),
            max_count=settings.request_media_max_count,
            max_bytes=settings.request_media_max_bytes,
            remote=(
                FilesApiUploads(database, settings, owned_llm.upload_file, owned_llm.files_account)
                if settings.llm_use_files_api and owned_llm is not None
                else None
            ),
        ),
        tools=registry,
        hub=hub,
        pieces=piece_catalog(settings, registry),
        operator_policy=operator_rules,
    )
    database.listener = parts.signal
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    if not database.is_sqlite:  # commits and live signals of every process reach every stream
        bridge = PgLiveBridge(settings.database_url, hub, database.availability)
        hub.bridge = bridge
        tasks.append(asyncio.create_task(bridge.run(stop), name="strata-live-bridge"))
        # the bridge brings other processes' commits; the clock only covers lost ones
        clock = run_clock(hub, settings.sse_keepalive_seconds, lambda: False, stop)
    else:
        clock = run_clock(hub, settings.live_poll_seconds, database.alone_since_last_look, stop)
    tasks.append(asyncio.create_task(clock, name="strata-live-clock"))
    if with_runner:
        parts.runner = Runner(
            settings,
            database,
            parts.llm,
            parts.tools,
            hub,
            parts.pieces,
            operator_policy=operator_rules,
        )
        hub.on_cancel = parts.runner.cancel  # cancels committed by other processes
        parts.dispatcher = WebhookDispatcher(settings, database)
        tasks.append(asyncio.create_task(parts.runner.run(stop), name="strata-runner"))
        tasks.append(asyncio.create_task(parts.dispatcher.run(stop), name="strata-webhooks"))
    try:
        yield parts
    finally:
        stop.set()
        for task in tasks:
            await task
        if owned_llm is not None:
            await owned_llm.close()
        await database.dispose()
