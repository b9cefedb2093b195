"""The summary model's retry rule (`app.worker.llm_retry`), against the fake Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.domain.items import TextBlock
from app.engine.anthropic import AnthropicLLM
from app.engine.llm import LLMRequest, Message
from app.settings import Settings
from app.worker.llm_retry import ask_for_text
from tests.fakes.messages_api import FakeMessagesAPI

REQUEST = LLMRequest(
    model="claude-test",
    system="Summarize.",
    messages=[Message(role="user", content=[TextBlock(text="the transcript")])],
    tools=[],
    max_tokens=64,
)


@pytest.fixture
def settings(fake_llm: FakeMessagesAPI) -> Settings:
    return Settings(
        _env_file=None, anthropic_base_url=fake_llm.url, llm_max_retries=0, summary_retries=2
    )


@pytest.fixture
async def llm(settings: Settings) -> AsyncIterator[AnthropicLLM]:
    client = AnthropicLLM(settings)
    try:
        yield client
    finally:
        await client.close()


async def test_a_failed_call_and_an_empty_answer_are_tried_again_until_one_answers(
    settings: Settings, llm: AnthropicLLM, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.error(500)
    fake_llm.reply("   ")
    fake_llm.reply("  the summary  ")

    text = await ask_for_text(settings, llm, REQUEST, clean=str.strip, what="a summary")

    assert text == "the summary"
    assert len(fake_llm.requests) == 3


async def test_after_summary_retries_plus_one_failures_there_is_no_text(
    settings: Settings, llm: AnthropicLLM, fake_llm: FakeMessagesAPI
) -> None:
    for _ in range(settings.summary_retries + 1):
        fake_llm.error(529)

    text = await ask_for_text(settings, llm, REQUEST, clean=str.strip, what="a summary")

    assert text is None
    assert len(fake_llm.requests) == 3
