"""The agent loop: request, answer, tools, again — until the model ends its turn.

The loop reads the segment from its store before every request, so a loop that
starts on a half-finished turn (after a crash) continues where the log stops.
Interceptors see a deep copy of each request: nothing they add is ever stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from app.domain.items import AssistantMessage, ItemPayload, Origin, ToolResult, ToolUseBlock
from app.engine.llm import LLM, LLMRequest, LLMResponse, Usage, text_of
from app.engine.requests import to_messages, turn_is_answered, unanswered_tool_uses
from app.engine.tools import ToolContext, ToolOutput, ToolRegistry

Interceptor = Callable[[LLMRequest], Awaitable[LLMRequest]]
AfterResponse = Callable[[LLMRequest, LLMResponse, int], Awaitable[bool]]

INTERRUPTED = (
    "interrupted: the worker running this tool stopped before its result was recorded; "
    "the tool may or may not have run"
)
CANCELLED = "cancelled: the job was cancelled before this tool finished; it may not have run"


class TurnStore(Protocol):
    """Where the loop reads the segment and appends what happens (durably)."""

    async def segment(self) -> list[ItemPayload]: ...

    async def append(
        self, payload: ItemPayload, origin: Origin, usage: Usage | None = None
    ) -> None: ...

    async def append_all(self, payloads: Sequence[ItemPayload], origin: Origin) -> None:
        """Several items in one go (one step's tool results)."""
        ...

    async def cancel_requested(self) -> bool: ...


class TurnEvents(Protocol):
    """Live, transient signals for watching clients; the store holds the durable facts."""

    async def text_delta(self, text: str) -> None: ...

    async def tool_started(self, block: ToolUseBlock) -> None: ...

    async def tool_finished(self, block: ToolUseBlock, output: ToolOutput) -> None: ...


@dataclass
class TurnConfig:
    model: str
    system: str | None
    tool_names: Sequence[str]
    max_iterations: int
    max_tokens: int
    interceptors: Sequence[Interceptor] = field(default_factory=tuple)
    # Called after each response whose tools have run, before the next request: the
    # place for context-budget actions (compaction in chat, wrap-up prompts and forced
    # transitions in movements). Returning True ends the turn ("stopped").
    after_response: AfterResponse | None = None


@dataclass
class TurnOutcome:
    status: Literal["completed", "cancelled", "max_iterations", "stopped", "ended_by_tool"]
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0


async def close_dangling_tool_uses(store: TurnStore, reason: str) -> None:
    """Give every unanswered tool call a result, so the log stays a valid conversation."""
    results = [
        ToolResult(tool_use_id=block.id, content=reason, is_error=True, name=block.name)
        for block in unanswered_tool_uses(await store.segment())
    ]
    if results:
        await store.append_all(results, Origin.system)


async def run_turn(
    llm: LLM,
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
) -> TurnOutcome:
    outcome = TurnOutcome(status="completed")
    await close_dangling_tool_uses(store, INTERRUPTED)
    specs = tools.specs(config.tool_names)  # the same for every request of the turn
    while True:
        items = await store.segment()
        if turn_is_answered(items):
            outcome.final_text = _last_text(items)
            return outcome
        if await store.cancel_requested():
            outcome.status = "cancelled"
            return outcome
        if outcome.iterations >= config.max_iterations:
            outcome.status = "max_iterations"
            return outcome
        outcome.iterations += 1

        request = LLMRequest(
            model=config.model,
            system=config.system,
            messages=to_messages(items),
            tools=specs,
            max_tokens=config.max_tokens,
        )
        outbound = request.copy()
        for interceptor in config.interceptors:
            outbound = await interceptor(outbound)
        response = await llm.complete(outbound, on_text=events.text_delta)
        outcome.usage = outcome.usage + response.usage
        assistant = AssistantMessage(
            content=response.content,
            model=response.model,
            stop_reason=response.stop_reason,
            usage=response.usage,
        )
        await store.append(assistant, Origin.llm, response.usage)

        ended_by = await _run_tools(response, store, tools, ctx, config, events)
        if ended_by is not None:
            outcome.status = "ended_by_tool"
            return outcome
        if not any(isinstance(b, ToolUseBlock) for b in response.content):
            outcome.final_text = text_of(response.content)
            return outcome
        if config.after_response is not None and await config.after_response(
            outbound, response, outcome.iterations
        ):
            outcome.status = "stopped"
            return outcome


async def _run_tools(
    response: LLMResponse,
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
) -> str | None:
    """Run the response's tool calls in order and record their results in one append
    (tools that record their own result, the task tools, do so as they run). Returns
    the name of a tool that ended the step, if one did."""
    results: list[ItemPayload] = []
    ended_by: str | None = None
    for block in (b for b in response.content if isinstance(b, ToolUseBlock)):
        if await store.cancel_requested():
            break
        if ended_by is not None:  # keep the log valid: the step is over
            skipped = f"not run: {ended_by} ended this step"
            results.append(_result(block, skipped, is_error=True))
            continue
        await events.tool_started(block)
        output = await tools.run(ctx, block.name, block.input, config.tool_names, block.id)
        if not output.recorded:
            results.append(_result(block, output.content, is_error=output.is_error))
        await events.tool_finished(block, output)
        if output.ends_turn:
            ended_by = block.name
    if results:
        await store.append_all(results, Origin.system)
    return ended_by


def _result(block: ToolUseBlock, content: str, *, is_error: bool) -> ToolResult:
    return ToolResult(tool_use_id=block.id, content=content, is_error=is_error, name=block.name)


def _last_text(items: Sequence[ItemPayload]) -> str:
    for item in reversed(items):
        if isinstance(item, AssistantMessage):
            return text_of(item.content)
    return ""
