"""The context manager (seed 004): how full the next request will be, and what to do.

A movement (or a chat segment) re-sends its whole message list on every LLM call, so
the list only grows. Before **every** request the manager estimates its size: the
input tokens the last answered request really cost (its usage), plus an estimate of
what was added since (characters / 4), and never less than the characters of the whole
request give. A request whose last response called no tool, or whose tools returned a
lot, is checked exactly like any other.

The estimate is compared with the thresholds, and each action fires at most once per
movement (or chat segment):

* ``warn`` (70%): record a progress event; nothing changes for the model yet.
* ``prompt`` (85%): add one user message asking the model to wrap up and transition.
* ``force_transition`` (95%): move on mechanically (to ``default_next``, else ABORT; in a
  chat, compact before sending). This is an escape hatch, not a judgement that the work
  is done.
* ``exhausted`` (99%): a request this large is never sent; if nothing made it smaller,
  the job fails (``context-exhausted``).

The estimator counts what the model reads (text, a tool call's name and JSON input, a
tool result's text, the system prompt and the tool definitions, a stored file's images
and pages at their own estimate, `FileRef.tokens`) and adds
:data:`BLOCK_OVERHEAD_CHARS` per block, message and tool for the framing around them,
so it errs on the high side. When the API still refuses a request as too long (its
tokenizer counts denser than 4 characters a token, as for code or non-English text), the
refusal's own count becomes the measure, and the estimate counts as densely from then on.
A refusal also names the API's maximum: when that is smaller than the window configured
(``STRATA_CONTEXT_WINDOW_TOKENS`` set above the model's window), it becomes the window
(:class:`WindowLimit` keeps it for every later request of the process), so the request
is compacted or moved on instead of being sent unchanged again.

Pure: no I/O, no settings import; the caller passes the window and the thresholds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from app.domain.items import DocumentBlock, ImageBlock, TextBlock, ThinkingBlock, ToolUseBlock
from app.engine.llm import LLMRequest, Message, MessageBlock, ToolResultBlock, ToolSpec

T = TypeVar("T")

ContextAction = Literal["warn", "prompt", "force_transition", "exhausted"]

DEFAULT_CHARS_PER_TOKEN: Final = 4.0
"""Rough characters per token for English-like text; what the estimate divides by."""

BLOCK_OVERHEAD_CHARS: Final = 32
"""Characters counted for the framing of each block, message and tool definition (the
roles, types and ids the API turns into a few tokens each)."""

IMAGE_CHARS: Final = 1_600 * 4
"""An image counted as the ~1,600 tokens of the largest image the API does not scale down."""


@dataclass(frozen=True)
class Thresholds:
    """Usage ratios (0..1] at which each action fires; the defaults are the seed's."""

    warn: float = 0.70
    prompt: float = 0.85
    force: float = 0.95
    exhausted: float = 0.99

    def __post_init__(self) -> None:
        # Out-of-order thresholds would fire actions in a surprising order (a forced
        # transition before the model was ever asked to wrap up); refuse them early.
        if not 0.0 < self.warn <= self.prompt <= self.force <= self.exhausted:
            raise ValueError(
                "context thresholds must satisfy 0 < warn <= prompt <= force <= exhausted, "
                f"got {self.warn}, {self.prompt}, {self.force}, {self.exhausted}"
            )

    def ordered(self) -> tuple[tuple[ContextAction, float], ...]:
        """The actions with their thresholds, in the order they fire."""
        return (
            ("warn", self.warn),
            ("prompt", self.prompt),
            ("force_transition", self.force),
            ("exhausted", self.exhausted),
        )


def _json_chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def block_chars(block: MessageBlock) -> int:
    """The characters one block adds to a request, framing included."""
    if isinstance(block, TextBlock):
        return BLOCK_OVERHEAD_CHARS + len(block.text)
    if isinstance(block, ToolUseBlock):
        return BLOCK_OVERHEAD_CHARS + len(block.name) + _json_chars(block.input)
    if isinstance(block, ToolResultBlock):
        if isinstance(block.content, str):
            return BLOCK_OVERHEAD_CHARS + len(block.content)
        return BLOCK_OVERHEAD_CHARS + sum(block_chars(inner) for inner in block.content)
    if isinstance(block, ImageBlock | DocumentBlock):
        if block.file is not None:  # a stored file: its own estimate (pixels, pages, text)
            return BLOCK_OVERHEAD_CHARS + int(block.file.tokens * DEFAULT_CHARS_PER_TOKEN)
        if isinstance(block, DocumentBlock):
            data = (block.source or {}).get("data")
            return BLOCK_OVERHEAD_CHARS + (len(data) if isinstance(data, str) else IMAGE_CHARS)
        return BLOCK_OVERHEAD_CHARS + IMAGE_CHARS
    if isinstance(block, ThinkingBlock):
        return 0  # never sent (see app.engine.anthropic)
    raise TypeError(f"unknown block {type(block).__name__}")


def blocks_chars(blocks: Iterable[MessageBlock]) -> int:
    return sum(block_chars(block) for block in blocks)


def request_chars(request: LLMRequest) -> int:
    """The characters of everything a request makes the model read, framing included."""
    return RequestSizer().chars(request)


class RequestSizer:
    """`request_chars` for the requests of one job, counting each message and tool once.

    A request shares its messages with the one before (`app.engine.requests.Conversation`
    adds only the new ones; messages are immutable) and its tools with every other, so
    the sizer keeps what it counted for the objects of the last request and counts only
    those it has not seen, so measuring every request of a turn does not grow with the
    segment (serializing every tool input and schema again costs ~1.7 ms per request of a
    100-message segment). The count is the same as counting everything afresh."""

    def __init__(self) -> None:
        # by id, each with its object: holding it keeps the id from naming another one
        self._known: dict[int, tuple[object, int]] = {}

    def chars(self, request: LLMRequest) -> int:
        counted: dict[int, tuple[object, int]] = {}
        total = len(request.system or "")
        for message in request.messages:
            total += self._count(counted, message, _message_chars)
        for tool in request.tools:
            total += self._count(counted, tool, _tool_chars)
        self._known = counted
        return total

    def _count(
        self, counted: dict[int, tuple[object, int]], obj: T, count: Callable[[T], int]
    ) -> int:
        known = self._known.get(id(obj))
        chars = known[1] if known is not None else count(obj)
        counted[id(obj)] = (obj, chars)
        return chars


def _message_chars(message: Message) -> int:
    return BLOCK_OVERHEAD_CHARS + blocks_chars(message.content)


def _tool_chars(tool: ToolSpec) -> int:
    return BLOCK_OVERHEAD_CHARS + len(tool.name) + len(tool.description) + tool.schema_chars


class WindowLimit:
    """The context window requests are held to: the configured one, until the API
    refuses a request naming a smaller maximum; that one from then on. One per process,
    shared by its jobs, so a window learnt in one turn holds for every later one."""

    def __init__(self, configured: int) -> None:
        if configured <= 0:
            raise ValueError(f"the window must be positive, got {configured}")
        self._tokens = configured

    @property
    def tokens(self) -> int:
        return self._tokens

    def learn(self, maximum: int | None) -> None:
        """The API said its window is `maximum` tokens: never hold requests to more."""
        if maximum is not None and 0 < maximum < self._tokens:
            self._tokens = maximum


@dataclass(frozen=True)
class Check:
    """The verdict on one request before it is sent."""

    tokens: int
    ratio: float
    crossed: tuple[ContextAction, ...]
    """Actions newly crossed by this request, in firing order (each fires once)."""


class ContextManager:
    """One per movement, or per chat segment: each action fires at most once in it."""

    def __init__(
        self,
        window_tokens: int,
        thresholds: Thresholds,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    ) -> None:
        if window_tokens <= 0:
            raise ValueError(f"window_tokens must be positive, got {window_tokens}")
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token}")
        self._window = window_tokens
        self._thresholds = thresholds
        self._chars_per_token = chars_per_token
        self._measured: tuple[int, int] | None = None  # (tokens, chars) of the last answer
        self._fired: set[ContextAction] = set()

    @property
    def window_tokens(self) -> int:
        return self._window

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def fired(self) -> frozenset[ContextAction]:
        """The actions already fired in this movement (or chat segment)."""
        return frozenset(self._fired)

    def already_fired(self, actions: Iterable[str]) -> None:
        """Actions fired before this manager existed (a movement resumed after a crash):
        they do not fire again. Names that are not actions are ignored."""
        wanted = set(actions)
        self._fired.update(a for a, _ in self._thresholds.ordered() if a in wanted)

    def estimate(self, chars: int) -> int:
        """Tokens of a request of `chars` characters: the last answered request's usage
        plus the characters added since (before any answer, the characters alone), and
        never less than the characters alone give, so a usage that under-reports cannot
        let a request through that its own size says is too large."""
        by_chars = math.ceil(max(0, chars) / self._chars_per_token)
        if self._measured is None:
            return by_chars
        tokens, measured_chars = self._measured
        added = math.ceil(max(0, chars - measured_chars) / self._chars_per_token)
        return max(by_chars, tokens + added)

    def ratio(self, chars: int) -> float:
        return self.estimate(chars) / self._window

    def check(self, chars: int) -> Check:
        """Estimate a request about to be sent and fire the thresholds it crosses.

        A jump over several thresholds returns every one of them, so the caller never
        skips the warning or the wrap-up message on the way to a forced transition.
        """
        tokens = self.estimate(chars)
        ratio = tokens / self._window
        crossed: list[ContextAction] = []
        for action, threshold in self._thresholds.ordered():
            if ratio >= threshold and action not in self._fired:
                self._fired.add(action)
                crossed.append(action)
        return Check(tokens=tokens, ratio=ratio, crossed=tuple(crossed))

    def too_full(self, ratio: float) -> bool:
        """Whether a request this full may not be sent (the exhausted threshold)."""
        return ratio >= self._thresholds.exhausted

    def at_force(self, ratio: float) -> bool:
        return ratio >= self._thresholds.force

    def answered(self, chars: int, input_tokens: int | None) -> None:
        """Record what the request of `chars` characters really cost.

        ``input_tokens`` sums ``usage.input_tokens`` with the cache-read and
        cache-creation tokens, since all three occupy the window. Without usage (None or
        0) the estimate stands in for it.
        """
        if input_tokens is not None and input_tokens < 0:
            raise ValueError(f"input_tokens must not be negative, got {input_tokens}")
        tokens = input_tokens if input_tokens else self.estimate(chars)
        self._measured = (tokens, chars)

    def refused(self, chars: int, tokens: int, window: int | None = None) -> None:
        """The API refused a request of `chars` characters as `tokens` tokens long: its
        tokenizer counts denser than the estimate, so the estimate counts as densely from
        now on (a restart keeps that), and the request is known to be that large. A
        `window` (the API's maximum) smaller than this manager's is its window from now
        on: measured against the larger one, the request would be sent unchanged again."""
        if tokens > 0 and chars > 0:
            self._chars_per_token = min(self._chars_per_token, chars / tokens)
        self._measured = (max(0, tokens), chars)
        if window is not None and 0 < window < self._window:
            self._window = window

    def available_tokens(self, chars: int) -> int:
        """Tokens left in the window by a request of `chars` characters: the base of the
        tool-result budget."""
        return max(0, self._window - self.estimate(chars))

    def restart(self) -> None:
        """A new segment (after a compaction): nothing measured, nothing fired."""
        self._measured = None
        self._fired.clear()


_REFUSED = (
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"),
    re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ \d+ > (\d+)"),
)


@dataclass(frozen=True)
class Refusal:
    """The API refusing a request as too large: the prompt's tokens, and its window."""

    tokens: int
    window: int


def refusal_of(message: str) -> Refusal | None:
    """What `message` says when it is the API refusing a request as too large for the
    window ("prompt is too long: N tokens > M maximum", or its input and `max_tokens`
    together: "N + K > M"); None for any other refusal."""
    for pattern in _REFUSED:
        if found := pattern.search(message):
            return Refusal(tokens=int(found.group(1)), window=int(found.group(2)))
    return None


def estimate_request_tokens(request: LLMRequest) -> int:
    """A request's tokens estimated from its characters alone (nothing measured yet)."""
    return math.ceil(request_chars(request) / DEFAULT_CHARS_PER_TOKEN)
