"""The metered LLM: the step gap is the time from a job's answer to its next request."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app.domain.items import TextBlock
from app.engine.anthropic import AnthropicLLM
from app.engine.llm import LLMRequest, Message
from app.observability import context
from app.observability.metered_llm import MeteredLLM
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, reply


def _gaps_counted() -> float:
    return REGISTRY.get_sample_value("strata_step_gap_seconds_count") or 0.0


async def _ask(llm: MeteredLLM, job: str) -> None:
    request = LLMRequest(
        model="claude-test",
        system=None,
        messages=[Message(role="user", content=(TextBlock(text="hi"),))],
    )
    with context.bound(job=job):
        await llm.complete(request)


async def test_the_jobs_remembered_for_the_step_gap_are_a_setting(
    fake_llm: FakeMessagesAPI,
) -> None:
    settings = Settings(
        _env_file=None, anthropic_base_url=fake_llm.url, llm_max_retries=0, step_gap_jobs=2
    )
    inner = AnthropicLLM(settings)
    llm = MeteredLLM(inner, settings.step_gap_jobs)
    fake_llm.always(lambda _body: reply("ok"))
    try:
        for job in ("a", "b", "c"):  # a third job: the first one's answer is forgotten
            await _ask(llm, job)
        before = _gaps_counted()
        await _ask(llm, "a")
        forgotten = _gaps_counted() - before
        await _ask(llm, "c")
        remembered = _gaps_counted() - before - forgotten
    finally:
        await inner.close()

    assert (forgotten, remembered) == (0, 1)
