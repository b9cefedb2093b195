"""The LLM's SDK clients (`ClientPools`): a request takes the first client with fewer
than `per_pool` requests in flight, a new client when none has.

One client carrying every request would not do: its connection pool looks through all
its connections on each request, which at a thousand in flight costs a call about as
much CPU again as split over pools."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import anthropic
import pytest

from app.engine.anthropic import AnthropicLLM, ClientPools
from tests.engine.test_anthropic_wire import fake_settings, request
from tests.fakes.messages_api import FakeMessagesAPI


def pools(per_pool: int) -> ClientPools:
    return ClientPools(lambda: anthropic.AsyncAnthropic(api_key="k"), per_pool)


def test_requests_one_after_another_use_one_client() -> None:
    clients = pools(2)
    seen = set()
    for _ in range(5):
        with clients.client() as client:
            seen.add(id(client))

    assert (len(seen), len(clients)) == (1, 1)


def test_past_per_pool_requests_in_flight_the_next_goes_to_a_new_client() -> None:
    clients = pools(2)
    with ExitStack() as in_flight:
        held = [id(in_flight.enter_context(clients.client())) for _ in range(5)]

    assert [held.index(c) for c in held] == [0, 0, 2, 2, 4]
    assert len(clients) == 3


def test_a_request_that_ended_frees_its_place_in_the_first_client() -> None:
    clients = pools(1)
    with clients.client() as first, clients.client() as second:
        assert first is not second
    with clients.client() as again:
        assert again is first


def test_a_request_that_failed_frees_its_place_too() -> None:
    clients = pools(1)
    with pytest.raises(RuntimeError), clients.client() as first:
        raise RuntimeError
    with clients.client() as again:
        assert again is first


async def test_the_llms_concurrent_requests_past_the_fill_take_a_second_client(
    fake_llm: FakeMessagesAPI,
) -> None:
    settings = fake_settings(fake_llm).model_copy(update={"llm_requests_per_pool": 1})
    llm = AnthropicLLM(settings)
    fake_llm.reply("one", delay=0.2)
    fake_llm.reply("two", delay=0.2)
    try:
        answers = await asyncio.gather(llm.complete(request()), llm.complete(request()))
        used = len(llm._pools)
    finally:
        await llm.close()

    assert sorted(a.content[0].text for a in answers) == ["one", "two"]  # type: ignore[union-attr]
    assert (used, len(llm._pools)) == (2, 0)
