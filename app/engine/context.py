"""The context manager (seed 004): how full a movement's context window is, and what to do.

A movement re-sends its whole message list on every LLM call, so the list only grows
until the movement transitions. The runner therefore watches each response and reacts
as the window fills:

* ``warn`` (70%): record a progress event; nothing changes for the model yet.
* ``prompt`` (85%): add one user message asking the model to wrap up and transition.
* ``force_transition`` (95%): move on mechanically (to ``default_next``, else ABORT; in a
  chat, compact instead). This is an escape hatch, not a judgement that the work is done.
* ``exhausted`` (99%): an internal verdict that another call is unlikely to fit.

Each action fires at most once per movement: a second "please wrap up" message would
only cost more context, and a second forced transition would be meaningless. A new
movement starts a fresh message list, so it gets a fresh manager.

Pure: no I/O, no settings import; the caller passes the window and the thresholds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

ContextAction = Literal["warn", "prompt", "force_transition", "exhausted"]

DEFAULT_CHARS_PER_TOKEN: Final = 4.0
"""Rough characters per token for English-like text; only used when usage is missing."""

ESTIMATE_FROM_ITERATION: Final = 3
"""Character estimates start at this (1-based) iteration when the provider gives no usage.

The first two requests hold little more than the system and user prompt, which the
window was sized for; estimating them would only add noise.
"""


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


class ContextManager:
    """One per movement: each action fires at most once per movement."""

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
        self._used_tokens = 0
        self._fired: set[ContextAction] = set()

    @property
    def window_tokens(self) -> int:
        return self._window

    @property
    def used_tokens(self) -> int:
        """Tokens of the last observed request (measured or estimated); 0 before any."""
        return self._used_tokens

    @property
    def ratio(self) -> float:
        """The last observed usage ratio (may exceed 1.0 if the provider over-reports)."""
        return self._used_tokens / self._window

    @property
    def exhausted(self) -> bool:
        """Whether the last observation is at or past the exhausted threshold."""
        return self.ratio >= self._thresholds.exhausted

    @property
    def fired(self) -> frozenset[ContextAction]:
        """The actions already fired in this movement."""
        return frozenset(self._fired)

    def available_tokens(self) -> int:
        """Tokens left in the window after the last request; the tool-result budget's base."""
        return max(0, self._window - self._used_tokens)

    def observe(
        self, *, iteration: int, input_tokens: int | None, prompt_chars: int
    ) -> list[ContextAction]:
        """Record one LLM response and return the actions newly crossed, in firing order.

        ``input_tokens`` is what the request really cost (the caller sums
        ``usage.input_tokens`` with the cache-read and cache-creation tokens, since all
        three occupy the window). When the provider reported no usage, the ratio is
        estimated from ``prompt_chars`` (the characters of the messages sent), but only
        from iteration 3 on; before that, nothing is recorded and no action fires.

        A jump over several thresholds returns every one of them, so the caller never
        skips the warning or the wrap-up message on the way to a forced transition.
        """
        if input_tokens is not None:
            if input_tokens < 0:
                raise ValueError(f"input_tokens must not be negative, got {input_tokens}")
            used = input_tokens
        elif iteration >= ESTIMATE_FROM_ITERATION:
            used = math.ceil(max(0, prompt_chars) / self._chars_per_token)
        else:
            return []
        self._used_tokens = used
        ratio = self.ratio
        crossed: list[ContextAction] = []
        for action, threshold in self._thresholds.ordered():
            if ratio >= threshold and action not in self._fired:
                self._fired.add(action)
                crossed.append(action)
        return crossed
