"""Collects every resource router."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.routes import (
    actions,
    api_keys,
    branching,
    chat,
    events,
    files,
    health,
    hooks,
    items,
    jobs,
    mcp_servers,
    memory,
    memory_search,
    metrics,
    pieces,
    sessions,
    tasks,
    tool_policy,
    tools,
    turns,
    webhooks,
)

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(sessions.router)
api_router.include_router(branching.router)
api_router.include_router(items.router)
api_router.include_router(tasks.router)
api_router.include_router(memory.router)
api_router.include_router(memory_search.router)
api_router.include_router(turns.router)
api_router.include_router(chat.router)
api_router.include_router(jobs.router)
api_router.include_router(actions.router)
api_router.include_router(actions.tenant_router)
api_router.include_router(pieces.router)
api_router.include_router(tools.router)
api_router.include_router(events.router)
api_router.include_router(hooks.router)
api_router.include_router(webhooks.router)
api_router.include_router(files.router)
api_router.include_router(metrics.router)
api_router.include_router(tool_policy.router)
api_router.include_router(api_keys.router)
api_router.include_router(mcp_servers.router)
