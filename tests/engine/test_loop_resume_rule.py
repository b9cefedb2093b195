"""The resume rule: a call a stopped worker left without a result runs again on resume
only when its tool says that is safe (an MCP tool of a trusted server declaring
readOnlyHint or idempotentHint); any other gets its tool's interrupted result."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.domain.items import AssistantMessage, ToolResult, user_text
from app.engine.loop import TurnConfig, run_turn
from app.engine.tools import Tool, ToolContext, ToolRegistry
from app.mcp.tools import INTERRUPTED
from tests.engine.scripted import InMemoryStore, RecordingEvents, ScriptedLLM, answer, call

CTX = ToolContext(tenant="acme", session_id="s1", job_id="j1")


class AnyInput(BaseModel):
    model_config = ConfigDict(extra="allow")


def registry(ran: list[str]) -> ToolRegistry:
    async def note(ctx: ToolContext, args: Any) -> str:
        ran.append(str(ctx.tool_use_id))
        return "listed again"

    return ToolRegistry(
        [
            Tool("mcp__git__git_log", "Log.", AnyInput, note, rerun_on_resume=True),
            Tool("mcp__git__git_commit", "Commit.", AnyInput, note, interrupted=INTERRUPTED),
        ]
    )


async def test_an_interrupted_call_runs_again_only_when_its_tool_allows_it() -> None:
    ran: list[str] = []
    store = InMemoryStore(
        [
            user_text("go"),
            AssistantMessage(
                content=[
                    call("mcp__git__git_log", {}, id="t1"),
                    call("mcp__git__git_commit", {"message": "m"}, id="t2"),
                ]
            ),
        ]
    )
    config = TurnConfig(
        model="test-model",
        system=None,
        tool_names=("mcp__git__git_log", "mcp__git__git_commit"),
        max_iterations=5,
        max_tokens=1000,
    )

    await run_turn(
        ScriptedLLM([answer("ok")]), store, registry(ran), CTX, config, RecordingEvents()
    )

    assert ran == ["t1"]
    results = {
        p.payload.tool_use_id: p.payload
        for p in store.appended
        if isinstance(p.payload, ToolResult)
    }
    assert (results["t1"].content, results["t1"].is_error) == ("listed again", False)
    assert (results["t2"].content, results["t2"].is_error) == (INTERRUPTED, True)
