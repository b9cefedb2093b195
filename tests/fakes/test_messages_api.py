"""The fake Messages API, driven by the real `anthropic` SDK over loopback."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import anthropic
import httpx
import pytest

from tests.fakes.messages_api import (
    FakeMessagesAPI,
    Step,
    count_tokens,
    error,
    hang,
    load_sse_fixture,
    reply,
    text,
    tool_use,
    validate_request,
)

MODEL = "claude-sonnet-4-5"
HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
READ_FILE: list[Any] = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}
]


def make_client(fake: FakeMessagesAPI, **options: Any) -> anthropic.AsyncAnthropic:
    options.setdefault("max_retries", 0)
    return anthropic.AsyncAnthropic(api_key="test", base_url=fake.url, **options)


async def test_streamed_text_arrives_in_several_deltas(fake_llm: FakeMessagesAPI) -> None:
    sentence = "The quick brown fox jumps over the lazy dog."
    fake_llm.reply(sentence, usage={"input_tokens": 21, "output_tokens": 9})

    deltas: list[str] = []
    async with make_client(fake_llm) as client:
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            async for event in stream:
                if event.type == "text":
                    deltas.append(event.text)
            final = await stream.get_final_message()

    assert len(deltas) >= 3
    assert "".join(deltas) == sentence
    assert final.content[0].type == "text"
    assert final.content[0].text == sentence
    assert final.stop_reason == "end_turn"
    assert final.model == MODEL
    assert final.id == "msg_fake_0001"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (21, 9)
    [sent] = fake_llm.requests
    assert sent.stream is True
    assert sent.body["messages"] == HELLO
    assert "anthropic-version" in sent.headers
    # SDK 2.15 sends the API key as `authorization: Bearer ...`; older ones used x-api-key.
    assert "test" in sent.headers.get("authorization", sent.headers.get("x-api-key", ""))


async def test_streamed_tool_use_parses_to_the_exact_input(fake_llm: FakeMessagesAPI) -> None:
    arguments = {"location": "Paris", "units": ["c", "f"], "note": 'say "bonjour", été'}
    call = tool_use("get_weather", arguments)
    fake_llm.reply(text("Let me check."), call)

    json_events = 0
    async with make_client(fake_llm) as client:
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            async for event in stream:
                json_events += event.type == "input_json"
            final = await stream.get_final_message()

    assert json_events >= 2
    assert final.stop_reason == "tool_use"
    assert [block.type for block in final.content] == ["text", "tool_use"]
    block = final.content[1]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == (call.id, "get_weather", arguments)
    assert call.id.startswith("toolu_fake_")


async def test_non_streamed_create_returns_the_message(fake_llm: FakeMessagesAPI) -> None:
    usage = {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 100}
    fake_llm.reply("Hi there.", tool_use("noop", {}, id="toolu_given"), usage=usage)
    system: list[Any] = [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    tools: list[Any] = [
        {"name": "noop", "description": "Does nothing.", "input_schema": {"type": "object"}}
    ]

    async with make_client(fake_llm) as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=32, messages=HELLO, system=system, tools=tools
        )

    assert message.content[0].type == "text"
    assert message.content[0].text == "Hi there."
    assert message.content[1].type == "tool_use"
    assert (message.content[1].id, message.content[1].input) == ("toolu_given", {})
    assert message.stop_reason == "tool_use"
    assert message.usage.cache_read_input_tokens == 100
    [sent] = fake_llm.requests
    assert sent.stream is False
    assert sent.system == system
    assert sent.tools == tools


async def test_overloaded_then_reply_succeeds_after_a_retry(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.enqueue(error(529), reply("Recovered."))

    async with make_client(fake_llm, max_retries=2) as client:
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert message.content[0].type == "text"
    assert message.content[0].text == "Recovered."
    assert len(fake_llm.requests) == 2


async def test_rate_limit_with_retry_after_zero_is_retried(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.error(429, headers={"retry-after": "0"})
    fake_llm.reply("Fine.")

    async with make_client(fake_llm, max_retries=1) as client:
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert message.content[0].type == "text"
    assert len(fake_llm.requests) == 2


async def test_retries_exhausted_raises_the_status_error(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.enqueue(error(529), error(529), error(529))

    async with make_client(fake_llm, max_retries=2) as client:
        with pytest.raises(anthropic.APIStatusError) as raised:
            await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert raised.value.status_code == 529
    assert isinstance(raised.value, anthropic.OverloadedError)
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_fake_0003",
    }
    assert len(fake_llm.requests) == 3


async def test_error_body_and_headers_can_be_given(fake_llm: FakeMessagesAPI) -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "too long"}}
    fake_llm.error(400, body, {"x-custom": "yes"})

    async with make_client(fake_llm, max_retries=2) as client:
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert raised.value.body == body
    assert raised.value.response.headers["x-custom"] == "yes"
    assert len(fake_llm.requests) == 1


async def test_hang_makes_the_client_time_out(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.enqueue(hang(30), reply("Still here."))

    async with make_client(fake_llm, timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)
        assert time.monotonic() - started < 5
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert message.content[0].type == "text"
    assert message.content[0].text == "Still here."


async def test_a_delayed_reply_can_be_cut_by_the_client_timeout(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply("Too late.", delay=5)

    async with make_client(fake_llm, timeout=0.3) as client:
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)


async def test_abandoning_a_slow_stream_leaves_the_server_usable(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply("one two three four five six seven eight", delay_between_chunks=0.2)
    fake_llm.reply("Next.")

    async with make_client(fake_llm) as client:
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            async for event in stream:
                if event.type == "text":
                    break
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert message.content[0].type == "text"
    assert message.content[0].text == "Next."


@pytest.mark.parametrize(
    ("fixture", "stop_reason", "types"),
    [
        ("basic_response", "end_turn", ["text"]),
        ("tool_use_response", "tool_use", ["text", "tool_use"]),
        ("incomplete_partial_json_response", "max_tokens", ["text", "tool_use"]),
    ],
)
async def test_recorded_sse_bodies_parse_with_the_sdk(
    fake_llm: FakeMessagesAPI, fixture: str, stop_reason: str, types: list[str]
) -> None:
    fake_llm.raw_sse(load_sse_fixture(fixture))

    async with make_client(fake_llm) as client:
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            final = await stream.get_final_message()

    assert final.stop_reason == stop_reason
    assert [block.type for block in final.content] == types
    first, last = final.content[0], final.content[-1]
    if fixture == "basic_response":
        assert first.type == "text"
        assert first.text == "Hello there!"
        assert final.model == "claude-3-opus-latest"
    elif fixture == "tool_use_response":
        assert last.type == "tool_use"
        assert (last.name, last.input) == ("get_weather", {"location": "Paris"})
        assert final.usage.output_tokens == 65
    else:
        assert last.type == "tool_use"
        assert last.name == "make_file"
        assert isinstance(last.input, dict)
        assert last.input["filename"] == "taxes.txt"


async def test_respond_with_decides_at_request_time(fake_llm: FakeMessagesAPI) -> None:
    def echo(body: dict[str, Any]) -> Step:
        return reply(f"You said: {body['messages'][-1]['content']}")

    fake_llm.respond_with(echo)

    async with make_client(fake_llm) as client:
        message = await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: Hello"


async def test_an_unscripted_request_fails_fast_and_is_reported(
    fake_llm: FakeMessagesAPI,
) -> None:
    async with make_client(fake_llm, max_retries=2) as client:
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)

    assert len(fake_llm.requests) == 1  # x-should-retry: false, so no retries
    [unexpected] = fake_llm.unexpected
    assert "no scripted response" in unexpected.reason
    with pytest.raises(AssertionError, match="1 unexpected request"):
        fake_llm.assert_all_consumed()
    fake_llm.reset()


def test_an_unused_step_is_reported(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.reply("never asked for")

    with pytest.raises(AssertionError, match="1 scripted step"):
        fake_llm.assert_all_consumed()
    fake_llm.reset()


async def test_a_request_the_real_api_would_reject_gets_a_400(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply("unused")
    orphan_result: list[Any] = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]}
    ]

    async with make_client(fake_llm) as client:
        with pytest.raises(anthropic.BadRequestError, match="tool_use_id"):
            await client.messages.create(
                model=MODEL, max_tokens=32, messages=orphan_result, tools=READ_FILE
            )

    assert len(fake_llm.pending) == 1
    assert len(fake_llm.unexpected) == 1
    fake_llm.reset()


async def test_a_tool_round_trip_passes_validation(fake_llm: FakeMessagesAPI) -> None:
    call = tool_use("read_file", {"path": "a.txt"})
    fake_llm.reply(call)
    fake_llm.reply("The file says hi.")

    async with make_client(fake_llm) as client:
        first = await client.messages.create(
            model=MODEL, max_tokens=32, messages=HELLO, tools=READ_FILE
        )
        history: list[Any] = [
            *HELLO,
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": "hi"},
                    {"type": "text", "text": "Go on."},
                ],
            },
        ]
        second = await client.messages.create(
            model=MODEL, max_tokens=32, messages=history, tools=READ_FILE
        )

    assert second.content[0].type == "text"
    assert fake_llm.requests[1].messages[2]["content"][0]["tool_use_id"] == call.id


async def _refusal(fake: FakeMessagesAPI, **body: Any) -> str:
    """The message of the 400 the fake answers `body` with (nothing consumed)."""
    fake.reply("unused")
    async with make_client(fake) as client:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.create(**{"model": MODEL, "max_tokens": 32, **body})
    assert len(fake.pending) == 1 and len(fake.unexpected) == 1
    error_body = refused.value.body
    assert isinstance(error_body, dict)
    assert error_body["error"]["type"] == "invalid_request_error"
    fake.reset()
    return str(error_body["error"]["message"])


async def test_a_prompt_over_the_window_is_too_long_counted_as_usage_reports_it(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.context_window_tokens = 1_000
    messages: list[Any] = [{"role": "user", "content": "word " * 1_000}]
    tokens = count_tokens({"messages": messages})
    assert tokens > 1_000

    message = await _refusal(fake_llm, messages=messages)

    assert message == f"prompt is too long: {tokens} tokens > 1000 maximum"


async def test_a_reply_reports_the_requests_counted_tokens_as_its_usage(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply("Hi.")
    body: dict[str, Any] = {"system": "Be brief.", "messages": HELLO, "tools": READ_FILE}

    async with make_client(fake_llm) as client:
        answer = await client.messages.create(model=MODEL, max_tokens=32, **body)

    assert answer.usage.input_tokens == count_tokens(body)
    assert answer.usage.input_tokens == count_tokens(fake_llm.requests[0].body)


async def test_a_prompt_that_fits_but_not_with_max_tokens_is_refused(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.context_window_tokens = 1_000
    messages: list[Any] = [{"role": "user", "content": "word " * 600}]
    tokens = count_tokens({"messages": messages})

    message = await _refusal(fake_llm, messages=messages, max_tokens=1_000 - tokens + 1)

    assert message.startswith(
        f"input length and `max_tokens` exceed context limit: {tokens} + {1_001 - tokens} > 1000"
    )


async def test_tool_blocks_in_a_request_without_tools_are_refused(
    fake_llm: FakeMessagesAPI,
) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi"}
    messages: list[Any] = [
        *HELLO,
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]

    message = await _refusal(fake_llm, messages=messages)

    assert message == (
        "messages.1.content: Requests which include `tool_use` or `tool_result` blocks "
        "must define tools."
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            [],
            "messages.0: all messages must have non-empty content except for the optional "
            "final assistant message",
        ),
        (
            "",
            "messages.0: all messages must have non-empty content except for the optional "
            "final assistant message",
        ),
        ([{"type": "text", "text": ""}], "messages: text content blocks must be non-empty"),
        (
            [{"type": "text", "text": " \n"}],
            "messages: text content blocks must contain non-whitespace text",
        ),
    ],
)
async def test_an_empty_message_or_text_block_is_refused(
    fake_llm: FakeMessagesAPI, content: Any, expected: str
) -> None:
    assert await _refusal(fake_llm, messages=[{"role": "user", "content": content}]) == expected


async def test_only_a_final_assistant_message_may_be_empty(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.reply("Hello!")
    messages: list[Any] = [*HELLO, {"role": "assistant", "content": []}]

    async with make_client(fake_llm) as client:
        answer = await client.messages.create(model=MODEL, max_tokens=32, messages=messages)

    assert answer.content[0].type == "text"


async def test_wait_for_requests_sees_a_request_in_flight(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.hang(30)

    async with make_client(fake_llm, timeout=1.0) as client:
        task = asyncio.create_task(
            client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)
        )
        [seen] = await fake_llm.wait_for_requests(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert seen.body["model"] == MODEL


def test_a_standalone_server_starts_and_stops() -> None:
    with FakeMessagesAPI() as fake:
        assert fake.url == f"http://127.0.0.1:{fake.port}"
        socket.create_connection(("127.0.0.1", fake.port), timeout=1).close()

    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", fake.port), timeout=1).close()


def test_the_server_side_of_a_connection_sends_without_delay() -> None:
    """TCP_NODELAY on the fake's side: without it, the last small write of every answer
    on a reused connection waits for the client's delayed ACK (~40 ms), and every
    benchmark timed against the fake measured that wait."""
    with FakeMessagesAPI() as fake, make_sync_request(fake) as client:
        deadline = time.monotonic() + 5
        while not fake.server_nodelay() and time.monotonic() < deadline:
            time.sleep(0.01)

        assert fake.server_nodelay() == [True]
        assert client.fileno() != -1  # the connection checked is still open


def make_sync_request(fake: FakeMessagesAPI) -> socket.socket:
    """A raw client connection that has sent one request (and read its answer)."""
    client = socket.create_connection(("127.0.0.1", fake.port), timeout=5)
    client.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.recv(4096).startswith(b"HTTP/1.1 404")
    return client


async def test_a_connection_warm_up_at_the_root_is_no_request(fake_llm: FakeMessagesAPI) -> None:
    async with httpx.AsyncClient(base_url=fake_llm.url) as client:
        warm = await client.head("/")
        other = await client.head("/v1/models")

    assert warm.status_code == 200
    assert fake_llm.warmups == 1
    assert other.status_code == 404  # any other HEAD is still an unexpected request
    assert [u.request.path for u in fake_llm.unexpected] == ["/v1/models"]
    fake_llm.reset()


_USE = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi"}
_ASK = {"role": "user", "content": "Read it."}
_USE_2 = {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}
_RESULT_2 = {"type": "tool_result", "tool_use_id": "toolu_2", "content": "ho"}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (  # the next message answers something else
            [_ASK, {"role": "assistant", "content": [_USE]}, {"role": "user", "content": "go"}],
            "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_1.",
        ),
        (  # two assistant messages in a row
            [
                _ASK,
                {"role": "assistant", "content": [_USE]},
                {"role": "assistant", "content": "done"},
            ],
            "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_1.",
        ),
        (  # a result after a user message, not after its call
            [_ASK, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [_RESULT]}],
            "messages.2.content: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1.",
        ),
        (  # text before the result
            [
                _ASK,
                {"role": "assistant", "content": [_USE]},
                {"role": "user", "content": [{"type": "text", "text": "here"}, _RESULT]},
            ],
            "messages.2.content: `tool_result` blocks must come first in the content array",
        ),
        (  # a message sent during the call, in a user message of its own before the result
            [
                _ASK,
                {"role": "assistant", "content": [_USE]},
                {"role": "user", "content": "use the blue one"},
                {"role": "user", "content": [_RESULT]},
            ],
            "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_1.",
        ),
        (  # text between the results of one response
            [
                _ASK,
                {"role": "assistant", "content": [_USE, _USE_2]},
                {
                    "role": "user",
                    "content": [_RESULT, {"type": "text", "text": "use the blue one"}, _RESULT_2],
                },
            ],
            "messages.2.content: `tool_result` blocks must come first in the content array",
        ),
    ],
)
def test_the_fake_refuses_unpaired_tool_blocks_with_the_real_apis_message(
    messages: list[Any], expected: str
) -> None:
    problem = validate_request(
        {"model": MODEL, "max_tokens": 32, "messages": messages, "tools": READ_FILE}
    )

    assert problem is not None and problem.startswith(expected), problem


def test_the_fake_accepts_a_call_answered_in_the_next_message() -> None:
    messages = [
        _ASK,
        {"role": "assistant", "content": [_USE]},
        {"role": "user", "content": [_RESULT]},
    ]

    assert (
        validate_request(
            {"model": MODEL, "max_tokens": 32, "messages": messages, "tools": READ_FILE}
        )
        is None
    )


def test_the_fake_accepts_text_after_the_tool_results_of_a_user_message() -> None:
    """What a steer taken at a step's end sends: the results, then the user's text."""
    messages = [
        _ASK,
        {"role": "assistant", "content": [_USE, _USE_2]},
        {
            "role": "user",
            "content": [_RESULT, _RESULT_2, {"type": "text", "text": "use the blue one"}],
        },
    ]

    assert (
        validate_request(
            {"model": MODEL, "max_tokens": 32, "messages": messages, "tools": READ_FILE}
        )
        is None
    )


@pytest.mark.parametrize(
    ("use_id", "result_id", "expected"),
    [
        (
            'toolu_1"><b>',
            'toolu_1"><b>',
            "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        ),
        (
            "toolu_1",
            "toolu_1\n",
            "messages.2.content.0.tool_result.tool_use_id: String should match pattern "
            "'^[a-zA-Z0-9_-]+$'",
        ),
    ],
)
def test_the_fake_refuses_a_tool_call_id_the_real_api_refuses(
    use_id: str, result_id: str, expected: str
) -> None:
    messages = [
        _ASK,
        {"role": "assistant", "content": [{**_USE, "id": use_id}]},
        {"role": "user", "content": [{**_RESULT, "tool_use_id": result_id}]},
    ]

    problem = validate_request(
        {"model": MODEL, "max_tokens": 32, "messages": messages, "tools": READ_FILE}
    )

    assert problem == expected


def test_the_fake_refuses_more_than_four_cache_breakpoints_as_the_real_api_does() -> None:
    cached = {"type": "ephemeral"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": cached}]},
        {"role": "assistant", "content": [{"type": "text", "text": "b", "cache_control": cached}]},
        {"role": "user", "content": [{"type": "text", "text": "c", "cache_control": cached}]},
    ]
    system = [{"type": "text", "text": "s", "cache_control": cached}]
    tools = [{**READ_FILE[0], "cache_control": cached}]
    body = {"model": MODEL, "max_tokens": 32, "messages": messages, "system": system}

    assert validate_request(body) is None
    assert validate_request({**body, "tools": tools}) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )
