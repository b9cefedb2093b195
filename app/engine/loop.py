"""The agent loop: request, answer, tools, again — until the model ends its turn.

The loop reads the segment from its store before every request, so a loop that
starts on a half-finished turn (after a crash) continues where the log stops.
Requests are immutable values (`app.engine.llm`): an interceptor returns a changed
request, and nothing it adds is ever stored.

Every request, whatever the response before it was, goes past the context policy
first (`ContextPolicy.before_request`): it may send it, change the segment and have it
built again (a compaction, a wrap-up message), end the turn (a forced transition), or
refuse it as too large for the window. A request the API still refuses as too long
tells the policy its real size and the API's window, and goes past it again (once a
turn). The tool calls of
one response share one result budget (`ResponseBudget`), which the policy sets from what
the window has left.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from app.domain.items import AssistantMessage, ItemPayload, Origin, ToolResult, ToolUseBlock
from app.engine.context import refusal_of
from app.engine.llm import (
    LLM,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    ToolSpec,
    Usage,
    text_of,
)
from app.engine.requests import Conversation, turn_is_answered, unanswered_tool_uses
from app.engine.tools import ToolContext, ToolOutput, ToolRegistry
from app.engine.truncation import ResponseBudget

Interceptor = Callable[[LLMRequest], Awaitable[LLMRequest]]

DEFAULT_RESULT_BUDGET = ResponseBudget(total_tokens=60_000, floor_tokens=1_000)
"""Without a context policy, the seed's cap holds for the results of one response."""

MAX_REBUILDS = 3
"""Times in a row a policy may change the segment before one request is sent; a policy
that asks for more is refused as exhausted rather than looping."""


@dataclass(frozen=True)
class ContextVerdict:
    """What to do with a request about to be sent."""

    action: Literal["send", "rebuild", "stop", "exhausted"]
    detail: str = ""


SEND = ContextVerdict("send")
REBUILD = ContextVerdict("rebuild")
STOP = ContextVerdict("stop")


class ContextPolicy(Protocol):
    """The context manager's side of the loop (chat: compaction; movements: seed 004)."""

    async def before_request(self, request: LLMRequest) -> ContextVerdict:
        """Called with each outbound request (interceptors applied) before it is sent."""
        ...

    def answered(self, request: LLMRequest, response: LLMResponse) -> ResponseBudget:
        """Record what the request cost; the budget the response's tool results share."""
        ...

    def refused(self, request: LLMRequest, tokens: int, window: int) -> None:
        """The API refused the request as `tokens` tokens, too many for its `window`: the
        next check of the segment knows its real size, held to that window."""
        ...


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

    async def append_answer(self, payload: ItemPayload, usage: Usage) -> None:
        """The LLM's answer that ends the turn (no tool call). The loop reads nothing after
        it, so a store may write it with the turn's end instead of on its own."""
        ...

    async def append_step(
        self, assistant: ItemPayload, usage: Usage, results: Sequence[ItemPayload]
    ) -> None:
        """An LLM response whose tool calls only read, with their results, once they ran:
        in one go (a store writes one transaction per step, not two)."""
        ...

    async def cancel_requested(self) -> bool: ...


class TurnEvents(Protocol):
    """Live, transient signals for watching clients; the store holds the durable facts."""

    async def text_delta(self, text: str, index: int) -> None: ...

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
    context: ContextPolicy | None = None
    # the messages an earlier turn of the session built (`TurnOutcome.conversation`): a
    # turn whose segment extends what it was built from builds only its new items'
    conversation: Conversation | None = None


@dataclass
class TurnOutcome:
    status: Literal[
        "completed", "cancelled", "max_iterations", "stopped", "ended_by_tool", "context_exhausted"
    ]
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    detail: str = ""
    conversation: Conversation | None = None  # for the session's next turn


async def close_dangling_tool_uses(
    store: TurnStore, reason: str, items: list[ItemPayload] | None = None
) -> bool:
    """Give every unanswered tool call a result, so the log stays a valid conversation;
    `items` is the segment when the caller has just read it. True when any was closed."""
    segment = await store.segment() if items is None else items
    results = [
        ToolResult(tool_use_id=block.id, content=reason, is_error=True, name=block.name)
        for block in unanswered_tool_uses(segment)
    ]
    if results:
        await store.append_all(results, Origin.system)
    return bool(results)


async def run_turn(
    llm: LLM,
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
) -> TurnOutcome:
    outcome = TurnOutcome(status="completed")
    items = await store.segment()
    # the first step goes on with this read (one probe per step) unless it closed calls
    fresh = not await close_dangling_tool_uses(store, INTERRUPTED, items)
    specs = tools.specs(config.tool_names)  # the same for every request of the turn
    # builds only the new items' messages per request; without tools, tool blocks as text
    conversation = config.conversation
    if conversation is None or conversation.tools_offered != bool(specs):
        conversation = Conversation(tools_offered=bool(specs))
    outcome.conversation = conversation
    rebuilds = refusals = 0
    while True:
        if not fresh:
            items = await store.segment()
        fresh = False
        if turn_is_answered(items):
            outcome.final_text = _last_text(items)
            return outcome
        if await store.cancel_requested():
            outcome.status = "cancelled"
            return outcome
        if outcome.iterations >= config.max_iterations:
            outcome.status = "max_iterations"
            return outcome

        outbound = await _outbound(config, conversation.messages(items), specs)
        verdict = await config.context.before_request(outbound) if config.context else SEND
        if verdict.action == "rebuild" and rebuilds < MAX_REBUILDS:
            rebuilds += 1
            continue
        if verdict.action == "stop":
            outcome.status = "stopped"
            return outcome
        if verdict.action != "send":
            outcome.status = "context_exhausted"
            outcome.detail = verdict.detail or "the policy kept changing the segment"
            return outcome
        rebuilds = 0
        outcome.iterations += 1

        try:
            response = await llm.complete(outbound, on_text=events.text_delta)
        except LLMError as exc:
            refusal = refusal_of(exc.detail) if config.context and not refusals else None
            if config.context is None or refusal is None:
                raise
            refusals += 1  # once per turn: a second refusal fails it
            config.context.refused(outbound, refusal.tokens, refusal.window)
            continue
        budget = (
            config.context.answered(outbound, response)
            if config.context
            else replace(DEFAULT_RESULT_BUDGET)
        )
        outcome.usage = outcome.usage + response.usage
        assistant = AssistantMessage(
            content=response.content,
            model=response.model,
            stop_reason=response.stop_reason,
            usage=response.usage,
        )
        calls = [b for b in response.content if isinstance(b, ToolUseBlock)]
        if not calls:
            await store.append_answer(assistant, response.usage)
            outcome.final_text = text_of(response.content)
            return outcome
        if all(tools.only_reads(call.name) for call in calls):
            # calls that only read run first, and the response is logged with their
            # results: one write per step
            ended_by, results = await _run_tools(calls, store, tools, ctx, config, events, budget)
            await store.append_step(assistant, response.usage, results)
        else:
            # a call that changes something is logged before it runs (a crash in between
            # leaves it dangling, closed as interrupted on resume)
            await store.append(assistant, Origin.llm, response.usage)
            ended_by, results = await _run_tools(calls, store, tools, ctx, config, events, budget)
            if results:
                await store.append_all(results, Origin.system)
        if ended_by is not None:
            outcome.status = "ended_by_tool"
            return outcome


async def _outbound(
    config: TurnConfig, messages: list[Message], specs: list[ToolSpec]
) -> LLMRequest:
    """The request of `messages`, as the interceptors leave it."""
    outbound = LLMRequest(
        model=config.model,
        system=config.system,
        messages=messages,
        tools=list(specs),
        max_tokens=config.max_tokens,
    )
    for interceptor in config.interceptors:
        outbound = await interceptor(outbound)
    return outbound


async def _run_tools(
    calls: list[ToolUseBlock],
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
    budget: ResponseBudget,
) -> tuple[str | None, list[ItemPayload]]:
    """Run a response's tool calls in order; their results, for the caller to record in
    one append (tools that record their own result, the task tools, do so as they run).
    The results share `budget`: each call is given its share as `ctx.result_tokens`.
    Also returns the name of a tool that ended the step, if one did."""
    results: list[ItemPayload] = []
    ended_by: str | None = None
    for index, block in enumerate(calls):
        if await store.cancel_requested():
            break
        if ended_by is not None:  # keep the log valid: the step is over
            skipped = f"not run: {ended_by} ended this step"
            results.append(_result(block, skipped, is_error=True))
            continue
        await events.tool_started(block)
        call_ctx = replace(ctx, result_tokens=budget.share(len(calls) - index))
        output = await tools.run(call_ctx, block.name, block.input, config.tool_names, block.id)
        budget.spend(output.content)
        if not output.recorded:
            results.append(_result(block, output.content, is_error=output.is_error))
        await events.tool_finished(block, output)
        if output.ends_turn:
            ended_by = block.name
    return ended_by, results


def _result(block: ToolUseBlock, content: str, *, is_error: bool) -> ToolResult:
    return ToolResult(tool_use_id=block.id, content=content, is_error=is_error, name=block.name)


def _last_text(items: Sequence[ItemPayload]) -> str:
    for item in reversed(items):
        if isinstance(item, AssistantMessage):
            return text_of(item.content)
    return ""
