"""The agent loop: request, answer, tools, again — until the model ends its turn.

The loop reads the segment from its store before every request, so a loop that
starts on a half-finished turn (after a crash) continues where the log stops, and
reports what happens to the store as steps (`TurnStore.record`): a response, its tool
results, a note; the store decides when each is written. Requests are immutable values
(`app.engine.llm`): an interceptor returns a changed request, and nothing it adds, nor
a task reminder (`Reminder`), is ever stored.

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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from app.domain.actions import Resolution
from app.domain.items import (
    AssistantMessage,
    ItemPayload,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    UserBlock,
    UserMessage,
)
from app.domain.tool_policy import Decision, Effect
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
from app.engine.requests import (
    Conversation,
    turn_is_answered,
    unanswered_tool_uses,
    with_text_at_end,
)
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


_ALLOWED = Decision(Effect.allow)
"""A call's decision where no policy applies (a turn without `Approvals`)."""

INTERRUPTED = (
    "interrupted: the worker running this tool stopped before its result was recorded; "
    "the tool may or may not have run"
)
CANCELLED = "cancelled: the job was cancelled before this tool finished; it may not have run"
INTERRUPTED_BY_USER = (
    "interrupted by the user: the turn was stopped before this tool finished; it may not have run"
)


@dataclass(frozen=True)
class Answered:
    """An LLM response, reported as it arrives: before any of its tool calls runs.

    `calls_change`: one of its calls may change something outside the log, so the store
    has the response durable before `record` returns (a crash before the call's result
    is logged leaves the call dangling, closed as interrupted on resume). A response whose
    calls only read may wait for their `Results`, and one without calls (the turn's
    answer) for the turn's end: nothing happened that a crash before then leaves unlogged.
    `reminded`: its request carried a due task reminder (see `Reminder`)."""

    message: AssistantMessage
    usage: Usage
    calls_change: bool = False
    reminded: bool = False

    @property
    def ends_turn(self) -> bool:
        """No tool call: the loop reads nothing after it."""
        return not any(isinstance(b, ToolUseBlock) for b in self.message.content)


@dataclass(frozen=True)
class Results:
    """Tool results, in call order: a step's, after its calls ran (empty when each call
    recorded its own, or the turn was cancelled before any ran), or the ones that close
    calls left unanswered (`close_dangling_tool_uses`). Every `Answered` with calls is
    followed by its step's `Results`."""

    results: tuple[ToolResult, ...]


@dataclass(frozen=True)
class Note:
    """A message the platform adds to the conversation (a wrap-up, a nudge)."""

    message: UserMessage


Step = Answered | Results | Note
"""What happened, as the loop (and what drives it) reports it to its store."""


class TurnStore(Protocol):
    """Where the loop reads the segment and records what happens, durably. How and when a
    step is written (alone, with the next, with the job's end) is the store's business,
    within what each step's type allows."""

    async def segment(self) -> list[ItemPayload]:
        """The log's current segment with the steps recorded so far; read between steps
        only (never between a response and its results, nor after the turn's answer)."""
        ...

    async def cancel_requested(self) -> bool:
        """Whether the job was asked to stop (checked before each request and call)."""
        ...

    async def record(self, step: Step) -> None:
        """What happened, once, in the order it happened."""
        ...


@dataclass(frozen=True)
class Reminder:
    """A task reminder due on a request: `text` to add at its end, or None when the whole
    list is in the request already. It counts as shown either way, once the request is
    answered (`Answered.reminded`); the log never holds it."""

    text: str | None


ReminderSource = Callable[[Sequence[ItemPayload]], Reminder | None]
"""The reminder due on the request built from a segment, if one is."""


class TurnEvents(Protocol):
    """Live, transient signals for watching clients; the store holds the durable facts."""

    async def text_delta(self, text: str, index: int) -> None: ...

    async def tool_started(self, block: ToolUseBlock) -> None: ...

    async def tool_finished(self, block: ToolUseBlock, output: ToolOutput) -> None: ...


@dataclass(frozen=True)
class Held:
    """A call the tool policy holds for a person (`ask`), and the rule that asked."""

    block: ToolUseBlock
    decision: Decision


class Approvals(Protocol):
    """The turn's tool policy and what people decided on the calls it held."""

    def decide(self, tool: str, tool_input: Mapping[str, Any]) -> Decision:
        """The policy's decision on a call, in memory (asked before each call runs)."""
        ...

    async def resolutions(self, blocks: Sequence[ToolUseBlock]) -> Mapping[str, Resolution]:
        """What was decided on these unanswered calls, by `tool_use_id` (a call nobody
        decided on is missing)."""
        ...

    async def starting(self, resolutions: Sequence[Resolution]) -> None:
        """These resolved calls are about to run: recorded durably before they do."""
        ...


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
    reminder: ReminderSource | None = None
    approvals: Approvals | None = None  # None: every call runs
    # tools the session's client runs, offered after the server's (`Approvals` holds
    # every call of them for the client's answer)
    client_tools: Sequence[ToolSpec] = ()


TurnStatus = Literal[
    "completed",
    "cancelled",
    "max_iterations",
    "stopped",
    "ended_by_tool",
    "context_exhausted",
    "waiting",
]


@dataclass
class TurnOutcome:
    status: TurnStatus
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    detail: str = ""
    conversation: Conversation | None = None  # for the session's next turn
    held: list[Held] = field(default_factory=list)  # `waiting`: the calls people decide on


async def close_dangling_tool_uses(
    store: TurnStore, reason: str, items: list[ItemPayload] | None = None
) -> bool:
    """Give every unanswered tool call a result, so the log stays a valid conversation;
    `items` is the segment when the caller has just read it. True when any was closed."""
    segment = await store.segment() if items is None else items
    results = tuple(
        ToolResult(tool_use_id=block.id, content=reason, is_error=True, name=block.name)
        for block in unanswered_tool_uses(segment)
    )
    if results:
        await store.record(Results(results))
    return bool(results)


async def run_turn(
    llm: LLM,
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
) -> TurnOutcome:
    """Request, answer, tools, again, until the turn ends; each step reads the segment
    once (the first goes on with the read that found no call to close)."""
    turn = _Turn(llm, store, tools, ctx, config, events)
    items = await store.segment()
    if unanswered_tool_uses(items):
        if await turn.resume(items):
            return turn.outcome
        items = await store.segment()
    while not await turn.ends_before(items) and not await turn.step(items):
        items = await store.segment()
    return turn.outcome


@dataclass(frozen=True)
class _Outbound:
    """A request as it is sent, and whether it carries a due reminder."""

    request: LLMRequest
    reminded: bool


class _Turn:
    """One run of the loop: its ports, and what it did so far (`outcome`)."""

    def __init__(
        self,
        llm: LLM,
        store: TurnStore,
        tools: ToolRegistry,
        ctx: ToolContext,
        config: TurnConfig,
        events: TurnEvents,
    ) -> None:
        self.llm, self.store, self.tools, self.ctx = llm, store, tools, ctx
        self.config, self.events = config, events
        # the same for every request of the turn
        self.specs = [*tools.specs(config.tool_names), *config.client_tools]
        # builds only the new items' messages per request; without tools, tool blocks as text
        conversation = config.conversation
        if conversation is None or conversation.tools_offered != bool(self.specs):
            conversation = Conversation(tools_offered=bool(self.specs))
        self.conversation = conversation
        self.outcome = TurnOutcome(status="completed", conversation=conversation)
        self.ended = False
        self.rebuilds = self.refusals = 0

    def end(self, status: TurnStatus, detail: str = "") -> bool:
        """The turn ends as `status`."""
        self.outcome.status = status
        self.outcome.detail = detail
        self.ended = True
        return True

    async def ends_before(self, items: list[ItemPayload]) -> bool:
        """Whether the turn is over before another request: answered, cancelled, or out of
        iterations."""
        if turn_is_answered(items):
            self.outcome.final_text = _last_text(items)
            return True
        if await self.store.cancel_requested():
            return self.end("cancelled")
        if self.outcome.iterations >= self.config.max_iterations:
            return self.end("max_iterations")
        return False

    async def resume(self, items: list[ItemPayload]) -> bool:
        """Answer the calls the log leaves unanswered, as people decided on them; a call
        nobody decided on is held again when the policy asks about it; else it was
        interrupted mid-call, and runs again only when its tool says that is safe
        (`Tool.rerun_on_resume`), otherwise its result says it was interrupted (in its
        tool's words, `Tool.interrupted`). True when that left the turn waiting."""
        approvals = self.config.approvals
        dangling = unanswered_tool_uses(items)
        resolved = await approvals.resolutions(dangling) if approvals is not None else {}
        runs = [r for b in dangling if (r := resolved.get(b.id)) and r.run and not r.started]
        if runs and approvals is not None:
            await approvals.starting(runs)
        budget = replace(DEFAULT_RESULT_BUDGET)
        results: list[ToolResult] = []
        held: list[Held] = []
        for index, block in enumerate(dangling):
            resolution = resolved.get(block.id)
            run: ToolUseBlock | None = None
            if resolution is None:
                decision = (
                    approvals.decide(block.name, block.input) if approvals is not None else _ALLOWED
                )
                if decision.effect is Effect.ask:
                    held.append(Held(block, decision))
                elif decision.effect is Effect.allow and self.tools.reruns_on_resume(block.name):
                    run = block
                else:
                    results.append(_result(block, self._interrupted(block), is_error=True))
            elif resolution.run and resolution.started:
                results.append(_result(block, self._interrupted(block), is_error=True))
            elif not resolution.run:
                results.append(_result(block, resolution.content, is_error=resolution.is_error))
            else:
                run = block.model_copy(update={"input": resolution.input or {}})
            if run is not None:
                share = budget.share(len(dangling) - index)
                output = await _run_one(run, self.tools, self.ctx, self.config, self.events, share)
                budget.spend(output.content)
                if not output.recorded:
                    results.append(_output_result(block, output))
        await self.store.record(Results(tuple(results)))
        if held:
            self.outcome.held = held
            return self.end("waiting")
        return False

    def _interrupted(self, block: ToolUseBlock) -> str:
        return self.tools.interrupted_text(block.name) or INTERRUPTED

    async def step(self, items: list[ItemPayload]) -> bool:
        """One request of `items` and what its response asks for; True when that ended the
        turn. A request the context policy rebuilt, or the API refused as too long, sends
        nothing more: the next step builds it anew."""
        outbound = await self._cleared(items)
        if outbound is None:
            return self.ended
        response = await self._ask(outbound.request)
        if response is None:
            return False
        return await self._answered(outbound, response)

    async def _cleared(self, items: list[ItemPayload]) -> _Outbound | None:
        """The request of `items`, once the context policy lets it go; None when it did not
        (it changed the segment, or ended the turn)."""
        messages = self.conversation.messages(items)
        outbound = await _outbound(self.config, items, messages, self.specs)
        policy = self.config.context
        verdict = await policy.before_request(outbound.request) if policy else SEND
        if verdict.action == "rebuild" and self.rebuilds < MAX_REBUILDS:
            self.rebuilds += 1
            return None
        if verdict.action == "stop":
            self.end("stopped")
            return None
        if verdict.action != "send":
            self.end("context_exhausted", verdict.detail or "the policy kept changing the segment")
            return None
        self.rebuilds = 0
        self.outcome.iterations += 1
        return outbound

    async def _ask(self, request: LLMRequest) -> LLMResponse | None:
        """The LLM's response; None when the API refused the request as too long and the
        policy was told its real size (once per turn: a second refusal fails it)."""
        try:
            return await self.llm.complete(request, on_text=self.events.text_delta)
        except LLMError as exc:
            policy = self.config.context
            refusal = refusal_of(exc.detail) if policy and not self.refusals else None
            if policy is None or refusal is None:
                raise
            self.refusals += 1
            policy.refused(request, refusal.tokens, refusal.window)
            return None

    async def _answered(self, outbound: _Outbound, response: LLMResponse) -> bool:
        """Record the response, run its tool calls and record their results; True when
        that ended the turn."""
        policy = self.config.context
        budget = (
            policy.answered(outbound.request, response)
            if policy
            else replace(DEFAULT_RESULT_BUDGET)
        )
        self.outcome.usage = self.outcome.usage + response.usage
        calls = [b for b in response.content if isinstance(b, ToolUseBlock)]
        answered = Answered(
            message=AssistantMessage(
                content=response.content,
                model=response.model,
                stop_reason=response.stop_reason,
                usage=response.usage,
            ),
            usage=response.usage,
            calls_change=not all(self.tools.only_reads(call.name) for call in calls),
            reminded=outbound.reminded,
        )
        await self.store.record(answered)
        if not calls:
            self.outcome.final_text = text_of(response.content)
            return True
        ended_by, results, held = await _run_tools(
            calls, self.store, self.tools, self.ctx, self.config, self.events, budget
        )
        await self.store.record(Results(tuple(results)))
        if held:
            self.outcome.held = held
            return self.end("waiting")
        return ended_by is not None and self.end("ended_by_tool")


async def _outbound(
    config: TurnConfig,
    items: Sequence[ItemPayload],
    messages: list[Message],
    specs: list[ToolSpec],
) -> _Outbound:
    """The request of `messages` (built from `items`), with the reminder due on it, as
    the interceptors leave it."""
    reminder = config.reminder(items) if config.reminder is not None else None
    volatile = 0
    if reminder is not None and reminder.text is not None:
        messages = with_text_at_end(messages, reminder.text)
        volatile = 1  # sent once: no cache breakpoint on it
    outbound = LLMRequest(
        model=config.model,
        system=config.system,
        messages=messages,
        tools=list(specs),
        max_tokens=config.max_tokens,
        volatile_blocks=volatile,
    )
    for interceptor in config.interceptors:
        outbound = await interceptor(outbound)
    return _Outbound(outbound, reminded=reminder is not None)


async def _run_tools(
    calls: list[ToolUseBlock],
    store: TurnStore,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
    budget: ResponseBudget,
) -> tuple[str | None, list[ToolResult], list[Held]]:
    """Run a response's tool calls in order; their results, for the caller to record in
    one append (tools that record their own result, the task tools, do so as they run).
    The results share `budget`: each call is given its share as `ctx.result_tokens`.
    Also returns the name of a tool that ended the step, if one did, and the calls the
    policy held for a person (they get no result here)."""
    results: list[ToolResult] = []
    held: list[Held] = []
    ended_by: str | None = None
    approvals = config.approvals
    for index, block in enumerate(calls):
        if await store.cancel_requested():
            break
        if ended_by is not None:  # keep the log valid: the step is over
            skipped = f"not run: {ended_by} ended this step"
            results.append(_result(block, skipped, is_error=True))
            continue
        if approvals is not None:
            decision = approvals.decide(block.name, block.input)
            if decision.effect is Effect.deny:
                results.append(_result(block, _denied(decision), is_error=True))
                continue
            if decision.effect is Effect.ask:
                held.append(Held(block, decision))
                continue
        share = budget.share(len(calls) - index)
        output = await _run_one(block, tools, ctx, config, events, share)
        budget.spend(output.content)
        if not output.recorded:
            results.append(_output_result(block, output))
        if output.ends_turn:
            ended_by = block.name
    return ended_by, results, held


async def _run_one(
    block: ToolUseBlock,
    tools: ToolRegistry,
    ctx: ToolContext,
    config: TurnConfig,
    events: TurnEvents,
    result_tokens: int,
) -> ToolOutput:
    """One call run, its start and end told to watching clients."""
    await events.tool_started(block)
    call_ctx = replace(ctx, result_tokens=result_tokens)
    output = await tools.run(call_ctx, block.name, block.input, config.tool_names, block.id)
    await events.tool_finished(block, output)
    return output


def _denied(decision: Decision) -> str:
    """The error result of a call a `deny` rule refused: the rule's reason, and where it is."""
    rule = decision.rule
    where = (
        f"the {decision.layer} tool policy, rule {decision.index}"
        if decision.layer is not None
        else "the tool's default policy"
    )
    reason = rule.reason if rule is not None and rule.reason else None
    return f"denied by {where}: {reason}" if reason else f"denied by {where}"


def _result(block: ToolUseBlock, content: str, *, is_error: bool) -> ToolResult:
    return ToolResult(tool_use_id=block.id, content=content, is_error=is_error, name=block.name)


def _output_result(block: ToolUseBlock, output: ToolOutput) -> ToolResult:
    """A call's result: its text, then the images it carries (as stored files)."""
    if not output.images:
        return _result(block, output.content, is_error=output.is_error)
    content: list[UserBlock] = [TextBlock(text=output.content)] if output.content else []
    content.extend(output.images)
    return ToolResult(
        tool_use_id=block.id, content=content, is_error=output.is_error, name=block.name
    )


def _last_text(items: Sequence[ItemPayload]) -> str:
    for item in reversed(items):
        if isinstance(item, AssistantMessage):
            return text_of(item.content)
    return ""
