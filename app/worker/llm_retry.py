"""The one retry rule for the summary model's calls outside the agent loop.

Compaction and L1 summaries ask the summary model for a text. A call the SDK gave up
on (an `LLMError`, after the SDK's own `llm_max_retries` with its backoff) or an
answer with no usable text is tried again, `summary_retries` times; after that the
caller decides what its failure means (compaction leaves the session unchanged, an L1
falls back to the L2 text). No wait between attempts: the SDK already waited between
its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.engine.llm import LLM, LLMError, LLMRequest, text_of
from app.settings import Settings

logger = logging.getLogger("strata.summary_model")


async def ask_for_text(
    settings: Settings,
    llm: LLM,
    request: LLMRequest,
    *,
    clean: Callable[[str], str],
    what: str,
) -> str | None:
    """The answer's text through `clean`, from the first of `summary_retries + 1`
    attempts whose cleaned text is not empty; None when none was. `what` names the call
    in the warnings logged for each failed attempt."""
    attempts = settings.summary_retries + 1
    for attempt in range(1, attempts + 1):
        try:
            response = await llm.complete(request)
        except LLMError as exc:
            logger.warning("%s, attempt %s of %s: %s", what, attempt, attempts, exc.detail)
            continue
        text = clean(text_of(response.content))
        if text:
            return text
        logger.warning("%s, attempt %s of %s: the answer was empty", what, attempt, attempts)
    return None
