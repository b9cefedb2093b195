"""In-memory doubles for the engine's ports: a scripted LLM, a turn store, recorded events.

`ScriptedLLM` is strict: it serves prepared responses in order, fails the test on a call
nobody scripted, and `assert_all_consumed()` fails on responses left over. Every request it
receives is recorded as a deep copy, so later mutation by anyone cannot rewrite what was sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.domain.items import ContentBlock, ItemPayload, Origin, TextBlock, ToolUseBlock
from app.engine.llm import LLMRequest, LLMResponse, TextSink, Usage
from app.engine.loop import Answered, Results, Step
from app.engine.tools import ToolOutput


def answer(
    *blocks: ContentBlock | str, usage: Usage | None = None, model: str | None = "scripted"
) -> LLMResponse:
    """A response made of `blocks` (a str is a text block); stop_reason follows the blocks."""
    content: list[ContentBlock] = [TextBlock(text=b) if isinstance(b, str) else b for b in blocks]
    wants_tool = any(isinstance(b, ToolUseBlock) for b in content)
    return LLMResponse(
        content=content,
        stop_reason="tool_use" if wants_tool else "end_turn",
        usage=usage if usage is not None else Usage(input_tokens=10, output_tokens=5),
        model=model,
    )


def call(name: str, tool_input: dict[str, object] | None = None, *, id: str) -> ToolUseBlock:
    return ToolUseBlock(id=id, name=name, input=dict(tool_input or {}))


class ScriptedLLM:
    """Implements the `LLM` Protocol by serving `responses` in order."""

    def __init__(self, responses: Iterable[LLMResponse] = ()) -> None:
        self._queue: deque[LLMResponse] = deque(responses)
        self.requests: list[LLMRequest] = []

    def enqueue(self, *responses: LLMResponse) -> None:
        self._queue.extend(responses)

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        self.requests.append(request)
        if not self._queue:
            raise AssertionError(
                f"unexpected LLM call #{len(self.requests)}: nothing scripted is left"
            )
        response = self._queue.popleft()
        if on_text is not None:
            for index, block in enumerate(response.content):
                if isinstance(block, TextBlock) and block.text:
                    half = len(block.text) // 2
                    for piece in (block.text[:half], block.text[half:]):
                        if piece:
                            await on_text(piece, index)
        return response.model_copy(deep=True)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def assert_all_consumed(self) -> None:
        assert not self._queue, f"{len(self._queue)} scripted LLM response(s) were never used"


@dataclass
class Appended:
    payload: ItemPayload
    origin: Origin
    usage: Usage | None


class InMemoryStore:
    """Implements `TurnStore` over a list: each step is in the list as it is recorded.
    `steps` holds every step recorded, in order. `cancel_after_appends=n` sets the cancel
    flag once the store has appended n items (counted from construction, seed excluded)."""

    def __init__(
        self, payloads: Iterable[ItemPayload] = (), *, cancel_after_appends: int | None = None
    ) -> None:
        self.payloads: list[ItemPayload] = list(payloads)
        self.appended: list[Appended] = []
        self.steps: list[Step] = []
        self.cancel = False
        self.cancel_after_appends = cancel_after_appends

    async def segment(self) -> list[ItemPayload]:
        return list(self.payloads)

    async def cancel_requested(self) -> bool:
        return self.cancel

    async def record(self, step: Step) -> None:
        self.steps.append(step)
        for appended in appended_by(step):
            self.payloads.append(appended.payload)
            self.appended.append(appended)
        if self.cancel_after_appends is not None and (
            len(self.appended) >= self.cancel_after_appends
        ):
            self.cancel = True


def appended_by(step: Step) -> list[Appended]:
    """The items a step puts in the log, with their origin and usage."""
    if isinstance(step, Answered):
        return [Appended(step.message, Origin.llm, step.usage)]
    if isinstance(step, Results):
        return [Appended(result, Origin.system, None) for result in step.results]
    return [Appended(step.message, Origin.system, None)]


@dataclass
class RecordingEvents:
    """Implements `TurnEvents` by keeping everything it is told, in order."""

    deltas: list[str] = field(default_factory=list)
    started: list[ToolUseBlock] = field(default_factory=list)
    finished: list[tuple[ToolUseBlock, ToolOutput]] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)

    async def text_delta(self, text: str, index: int) -> None:
        self.deltas.append(text)
        self.log.append(("text", text))

    async def tool_started(self, block: ToolUseBlock) -> None:
        self.started.append(block)
        self.log.append(("started", block.id))

    async def tool_finished(self, block: ToolUseBlock, output: ToolOutput) -> None:
        self.finished.append((block, output))
        self.log.append(("finished", block.id))
