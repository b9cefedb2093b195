"""L1: the one-line summary of a turn's L2, asked of the cheap summary model.

The target length is a fraction (1/5 by default) of the L2 text: the seed's
measurements found 1/5 keeps every topic of a multi-topic text, 1/10 does not.
"""

from __future__ import annotations

from app.domain.items import TextBlock
from app.engine.llm import LLMRequest, Message

L1_SYSTEM = (
    "You write one-line summaries of turns of a conversation between a user and an AI "
    "agent, for an index the agent reads later. Keep every topic, name, number, decision "
    "and conclusion; drop pleasantries. Answer with the summary line only."
)
MIN_TARGET_CHARS = 40


def l2_text(user_text: str, assistant_text: str) -> str:
    parts = [
        f"user: {user_text}" if user_text else "",
        f"assistant: {assistant_text}" if assistant_text else "",
    ]
    return "\n".join(p for p in parts if p)


def target_chars(l2: str, ratio: float) -> int:
    return max(MIN_TARGET_CHARS, int(len(l2) * ratio))


def l1_request(l2: str, *, model: str, ratio: float, max_tokens: int) -> LLMRequest:
    target = target_chars(l2, ratio)
    prompt = (
        f"Summarize this turn in one line of about {target} characters "
        f"(about {ratio:.0%} of its length):\n\n{l2}"
    )
    return LLMRequest(
        model=model,
        system=L1_SYSTEM,
        messages=[Message(role="user", content=[TextBlock(text=prompt)])],
        max_tokens=max_tokens,
        cached=False,  # each prompt is one turn's: a cache write would never be read
    )


def one_line(text: str) -> str:
    return " ".join(text.split())
