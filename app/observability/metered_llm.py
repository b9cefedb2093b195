"""An LLM that counts: requests, latency, tokens and errors by model, and the gap between a
job's answer and its next request (the step overhead), all in memory."""

from __future__ import annotations

import time
from collections import OrderedDict

from app.engine.llm import LLM, LLMError, LLMRequest, LLMResponse, TextSink
from app.observability import context, tracing
from app.observability.metrics import (
    LLM_ERRORS,
    LLM_LATENCY,
    LLM_REQUESTS,
    LLM_TOKENS,
    STEP_GAP,
)


class MeteredLLM:
    """`remembered_jobs`: the jobs whose last answer is kept for the step gap, the oldest
    forgotten first (`STRATA_STEP_GAP_JOBS`)."""

    def __init__(self, inner: LLM, remembered_jobs: int) -> None:
        self.inner = inner
        self._remembered_jobs = remembered_jobs
        self._answered_at: OrderedDict[str, float] = OrderedDict()

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        job = context.job_id.get()
        started = time.monotonic()
        if job is not None and job in self._answered_at:
            STEP_GAP.observe(started - self._answered_at.pop(job))
        model = request.model
        try:
            with tracing.span(f"llm {model}", {"gen_ai.request.model": model}):
                response = await self.inner.complete(request, on_text)
        except LLMError as exc:
            LLM_REQUESTS.labels(model, "error").inc()
            LLM_ERRORS.labels(model, exc.slug).inc()
            raise
        finished = time.monotonic()
        LLM_REQUESTS.labels(model, "ok").inc()
        LLM_LATENCY.labels(model).observe(finished - started)
        usage = response.usage
        for kind, tokens in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens),
            ("cache_creation", usage.cache_creation_input_tokens),
        ):
            if tokens:
                LLM_TOKENS.labels(model, kind).inc(tokens)
        if job is not None:
            self._answered_at[job] = finished
            while len(self._answered_at) > self._remembered_jobs:
                self._answered_at.popitem(last=False)
        return response
