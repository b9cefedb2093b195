"""The Anthropic adapter: the request body it builds and the errors it reports."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anthropic
import anthropic._utils._prepare as sdk_prepare
import httpx2
import pytest

from app.domain.items import ImageBlock, TextBlock, ThinkingBlock, ToolUseBlock
from app.engine.anthropic import AnthropicLLM, _as_llm_error, sdk_params, wire_params
from app.engine.llm import LLMError, LLMRequest, Message, ToolResultBlock, ToolSpec, Usage
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, tool_use, validate_request

EPHEMERAL = {"type": "ephemeral"}
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ECHO = ToolSpec(name="echo", description="Repeat the text.", input_schema=SCHEMA)


def request(
    messages: list[Message] | None = None,
    *,
    system: str | None = "You are terse.",
    tools: list[ToolSpec] | None = None,
) -> LLMRequest:
    return LLMRequest(
        model="claude-test",
        system=system,
        messages=messages
        if messages is not None
        else [Message(role="user", content=[TextBlock(text="hi")])],
        tools=tools if tools is not None else [],
        max_tokens=256,
    )


def conversation() -> list[Message]:
    return [
        Message(role="user", content=[TextBlock(text="look at this")]),
        Message(
            role="assistant",
            content=[
                ThinkingBlock(thinking="let me think", signature="sig"),
                TextBlock(text="Echoing."),
                ToolUseBlock(id="t1", name="echo", input={"text": "a"}),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultBlock(tool_use_id="t1", content="a"),
                TextBlock(text="go on"),
            ],
        ),
    ]


def cache_control_paths(value: Any, path: str = "") -> Iterator[str]:
    """Where in a JSON-like value a `cache_control` key sits."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cache_control":
                yield path
            yield from cache_control_paths(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from cache_control_paths(item, f"{path}[{index}]")


# ----------------------------------------------------------------------------- wire_params


def test_the_system_prompt_is_one_cached_text_block() -> None:
    params = wire_params(request())

    assert params["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]


def test_the_last_block_of_the_last_message_is_cached() -> None:
    params = wire_params(request(conversation()))

    last = params["messages"][-1]["content"][-1]
    assert last == {"type": "text", "text": "go on", "cache_control": EPHEMERAL}


def test_cache_control_is_set_on_the_system_the_last_block_and_the_previous_requests_end() -> None:
    params = wire_params(request(conversation(), tools=[ECHO]))

    assert sorted(cache_control_paths(params)) == [
        "messages[0].content[0]",
        "messages[2].content[1]",
        "system[0]",
    ]


def test_without_system_only_the_conversations_blocks_are_cached() -> None:
    params = wire_params(request(conversation(), system=None))

    assert "system" not in params
    assert list(cache_control_paths(params)) == ["messages[0].content[0]", "messages[2].content[1]"]


def test_an_empty_system_prompt_is_not_sent() -> None:
    assert "system" not in wire_params(request(system=""))


def test_the_request_is_not_mutated_by_setting_cache_breakpoints() -> None:
    req = request(conversation())
    before = [m.model_dump() for m in req.messages]

    wire_params(req)
    wire_params(req)

    assert [m.model_dump() for m in req.messages] == before


def test_a_later_request_sharing_the_messages_carries_only_its_own_breakpoint() -> None:
    messages = conversation()
    earlier = request(messages)
    later = request([*messages, Message(role="assistant", content=(TextBlock(text="ok"),))])

    wire_params(earlier)
    params = wire_params(later)

    assert list(cache_control_paths(params["messages"])) == ["[2].content[1]", "[3].content[0]"]


def parallel_calls(count: int) -> list[Message]:
    """A user's question, one response of `count` tool calls, and their results."""
    calls = [ToolUseBlock(id=f"t{n}", name="echo", input={"text": str(n)}) for n in range(count)]
    results = [ToolResultBlock(tool_use_id=f"t{n}", content=str(n)) for n in range(count)]
    return [
        Message(role="user", content=[TextBlock(text="do them all")]),
        Message(role="assistant", content=calls),
        Message(role="user", content=results),
    ]


def test_the_previous_requests_end_keeps_a_breakpoint_after_twelve_parallel_calls() -> None:
    """24 blocks since the previous request's breakpoint: more than the ~20 the API looks
    back, so without a breakpoint there the whole prefix would be written again."""
    params = wire_params(request(parallel_calls(12), tools=[ECHO]))

    assert list(cache_control_paths(params["messages"])) == ["[0].content[0]", "[2].content[11]"]


def test_no_breakpoint_sits_on_a_volatile_block() -> None:
    """The task reminder ends the request it rides on only: a breakpoint on it would write
    an entry no later request could read, and leave the prefix before it unwritten."""
    *head, last = conversation()
    reminded = Message(role="user", content=(*last.content, TextBlock(text="reminder")))

    params = wire_params(replace(request([*head, reminded]), volatile_blocks=1))

    assert "cache_control" not in params["messages"][2]["content"][-1]
    assert params["messages"][2]["content"][-2]["cache_control"] == EPHEMERAL


def test_a_request_holds_at_most_four_breakpoints_the_api_accepts() -> None:
    for messages in (conversation(), parallel_calls(12), conversation()[:1]):
        for volatile in (0, 1):
            params = wire_params(replace(request(messages, tools=[ECHO]), volatile_blocks=volatile))

            assert len(list(cache_control_paths(params))) <= 4
            assert validate_request(params) is None


def test_an_uncached_request_marks_no_breakpoint() -> None:
    params = wire_params(replace(request(conversation(), tools=[ECHO]), cached=False))

    assert list(cache_control_paths(params)) == []


def test_thinking_blocks_are_not_sent() -> None:
    params = wire_params(request(conversation()))

    assistant = params["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]


def test_a_message_of_only_thinking_is_dropped() -> None:
    messages = [
        Message(role="user", content=[TextBlock(text="hi")]),
        Message(role="assistant", content=[ThinkingBlock(thinking="hmm")]),
    ]

    params = wire_params(request(messages))

    assert [m["role"] for m in params["messages"]] == ["user"]
    assert params["messages"][0]["content"][-1]["cache_control"] == EPHEMERAL


def test_messages_keep_their_roles_and_block_shapes() -> None:
    params = wire_params(request(conversation()))

    assert params["model"] == "claude-test"
    assert params["max_tokens"] == 256
    assert params["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "look at this", "cache_control": EPHEMERAL}],
    }
    assert params["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "echo",
        "input": {"text": "a"},
    }
    assert params["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "a",
        "is_error": False,
    }


def test_images_in_tool_results_are_sent_as_blocks() -> None:
    image = ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AA=="})
    messages = [
        Message(role="user", content=[TextBlock(text="go")]),
        Message(role="assistant", content=[ToolUseBlock(id="t1", name="shot")]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content=[image])]),
    ]

    params = wire_params(request(messages))

    [block] = params["messages"][2]["content"]
    assert block["content"] == [image.model_dump(mode="json", exclude_none=True)]


def test_tools_are_sent_with_name_description_and_input_schema() -> None:
    params = wire_params(request(tools=[ECHO]))

    assert params["tools"] == [
        {"name": "echo", "description": "Repeat the text.", "input_schema": SCHEMA}
    ]


def test_no_tools_key_without_tools() -> None:
    assert "tools" not in wire_params(request())


# ---------------------------------------------------------------------------- _as_llm_error

URL = "https://api.anthropic.com/v1/messages"


def status_error(cls: type[anthropic.APIStatusError], status: int) -> anthropic.APIStatusError:
    body = {"type": "error", "error": {"type": "some_error", "message": "went wrong"}}
    response = httpx2.Response(status, request=httpx2.Request("POST", URL), json=body)
    return cls("went wrong", response=response, body=body)


@pytest.mark.parametrize(
    ("cls", "status", "slug"),
    [
        (anthropic.OverloadedError, 529, "llm-overloaded"),
        (anthropic.RateLimitError, 429, "llm-rate-limited"),
        (anthropic.InternalServerError, 500, "llm-server-error"),
        (anthropic.InternalServerError, 503, "llm-server-error"),
        (anthropic.BadRequestError, 400, "llm-request-rejected"),
        (anthropic.NotFoundError, 404, "llm-request-rejected"),
        (anthropic.AuthenticationError, 401, "llm-authentication"),
        (anthropic.PermissionDeniedError, 403, "llm-permission"),
    ],
)
def test_status_errors_map_to_slugs(
    cls: type[anthropic.APIStatusError], status: int, slug: str
) -> None:
    error = _as_llm_error(status_error(cls, status), retries=2)

    assert error.slug == slug
    assert error.status == status
    assert str(status) in error.detail
    assert "went wrong" in error.detail


@pytest.mark.parametrize("status", [429, 500, 529])
def test_retried_statuses_say_how_many_attempts_were_made(status: int) -> None:
    error = _as_llm_error(status_error(anthropic.APIStatusError, status), retries=2)

    assert "after 3 attempts" in error.detail


def test_a_rejected_request_does_not_claim_retries() -> None:
    error = _as_llm_error(status_error(anthropic.BadRequestError, 400), retries=2)

    assert "attempts" not in error.detail


def test_a_timeout_maps_to_llm_timeout() -> None:
    exc = anthropic.APITimeoutError(request=httpx2.Request("POST", URL))

    error = _as_llm_error(exc, retries=0)

    assert error.slug == "llm-timeout"
    assert error.status is None


def test_a_connection_failure_maps_to_llm_unreachable() -> None:
    exc = anthropic.APIConnectionError(request=httpx2.Request("POST", URL))

    assert _as_llm_error(exc, retries=0).slug == "llm-unreachable"


def test_an_unreachable_api_says_what_the_transport_saw() -> None:
    """The job's error is all a user has to go on: "refused" and "reset" differ."""
    exc = anthropic.APIConnectionError(request=httpx2.Request("POST", URL))
    exc.__cause__ = ConnectionRefusedError(111, "Connection refused")

    detail = _as_llm_error(exc, retries=2).detail

    assert detail.endswith(
        "after 3 attempts (ConnectionRefusedError: [Errno 111] Connection refused)"
    )


# ---------------------------------------------------------------------------- AnthropicLLM


def fake_settings(fake: FakeMessagesAPI) -> Settings:
    return Settings(_env_file=None, anthropic_base_url=fake.url, llm_max_retries=0)


async def test_without_key_or_base_url_the_llm_is_not_configured() -> None:
    llm = AnthropicLLM(Settings(_env_file=None))

    assert not llm.configured
    with pytest.raises(LLMError) as caught:
        await llm.complete(request())

    assert caught.value.slug == "llm-not-configured"
    assert "ANTHROPIC_API_KEY" in caught.value.detail


async def test_a_529_from_the_api_is_reported_as_overloaded(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.error(529)
    llm = AnthropicLLM(fake_settings(fake_llm))
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(request())
    finally:
        await llm.close()

    assert caught.value.slug == "llm-overloaded"
    assert caught.value.status == 529


async def test_complete_streams_text_and_sends_the_wire_params(
    fake_llm: FakeMessagesAPI,
) -> None:
    fake_llm.reply(
        "The quick brown fox jumps.",
        usage={"input_tokens": 12, "output_tokens": 6, "cache_read_input_tokens": 4},
    )
    deltas: list[str] = []

    async def sink(text: str, index: int) -> None:
        deltas.append(text)

    llm = AnthropicLLM(fake_settings(fake_llm))
    try:
        response = await llm.complete(request(conversation(), tools=[ECHO]), on_text=sink)
    finally:
        await llm.close()

    assert response.content == [TextBlock(text="The quick brown fox jumps.")]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=12, output_tokens=6, cache_read_input_tokens=4)
    assert len(deltas) >= 2
    assert "".join(deltas) == "The quick brown fox jumps."
    [sent] = fake_llm.requests
    assert sent.stream
    expected = wire_params(request(conversation(), tools=[ECHO]))
    assert {key: sent.body[key] for key in expected} == expected


async def test_each_text_delta_names_its_content_block(fake_llm: FakeMessagesAPI) -> None:
    fake_llm.reply(tool_use("echo", {"text": "x"}), "after the tool", stop_reason="tool_use")
    deltas: list[tuple[int, str]] = []

    async def sink(text: str, index: int) -> None:
        deltas.append((index, text))

    llm = AnthropicLLM(fake_settings(fake_llm))
    try:
        await llm.complete(request(conversation(), tools=[ECHO]), on_text=sink)
    finally:
        await llm.close()

    assert {index for index, _ in deltas} == {1}
    assert "".join(text for _, text in deltas) == "after the tool"


async def test_a_tool_call_id_the_messages_api_refuses_is_rewritten_so_the_next_request_is_valid(
    fake_llm: FakeMessagesAPI,
) -> None:
    """A compatible endpoint answers `call.1"x`: the next request, which sends the call and
    its result back, would be refused by the Messages API with that id."""
    fake_llm.reply(tool_use("echo", {"text": "x"}, id='call.1"x'))
    fake_llm.reply("done")
    llm = AnthropicLLM(fake_settings(fake_llm))
    try:
        first = await llm.complete(request(tools=[ECHO]))
        [call] = first.content
        assert isinstance(call, ToolUseBlock)
        answered = [
            *request().messages,
            Message(role="assistant", content=[call]),
            Message(role="user", content=[ToolResultBlock(tool_use_id=call.id, content="x")]),
        ]
        second = await llm.complete(request(answered, tools=[ECHO]))
    finally:
        await llm.close()

    assert call.id != 'call.1"x' and call.id.startswith("call_1_x_")
    assert second.content == [TextBlock(text="done")]
    assert fake_llm.unexpected == []


# ------------------------------------------------------------------ what the SDK is handed

_STREAM = "".join(
    f"event: {event}\ndata: {data}\n\n"
    for event, data in (
        (
            "message_start",
            '{"type":"message_start","message":{"id":"msg_1","type":"message",'
            '"role":"assistant","model":"claude-test","content":[],"stop_reason":null,'
            '"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}',
        ),
        (
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn",'
            '"stop_sequence":null},"usage":{"output_tokens":1}}',
        ),
        ("message_stop", '{"type":"message_stop"}'),
    )
).encode()


def long_conversation(steps: int) -> list[Message]:
    """A tool loop of `steps` calls and results after one user message."""
    messages = [Message(role="user", content=[TextBlock(text="Read the sources.")])]
    for n in range(steps):
        call = ToolUseBlock(id=f"t{n}", name="echo", input={"text": f"file_{n}.py"})
        messages.append(Message(role="assistant", content=[call]))
        result = ToolResultBlock(tool_use_id=f"t{n}", content=f"x = {n}\n" * 20)
        messages.append(Message(role="user", content=[result]))
    return messages


async def bodies_sent(*params: dict[str, Any]) -> list[bytes]:
    """The bytes the SDK sends for each of these `messages.stream` parameters."""
    sent: list[bytes] = []

    def answer(http_request: httpx2.Request) -> httpx2.Response:
        sent.append(http_request.content)
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=_STREAM)

    transport = httpx2.MockTransport(answer)
    async with httpx2.AsyncClient(transport=transport) as http:
        client = anthropic.AsyncAnthropic(api_key="k", http_client=http, max_retries=0)
        for one in params:
            async with client.messages.stream(**one) as stream:
                await stream.get_final_message()
    return sent


async def test_the_sdk_sends_the_plain_wire_json_byte_for_byte() -> None:
    asked = request(long_conversation(50), tools=[ECHO])

    plain, handed = await bodies_sent(wire_params(asked), sdk_params(asked))

    assert handed == plain


async def test_the_sdks_copy_of_a_body_does_not_walk_the_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK copies a body once before sending it; the conversation, most of it, is
    handed over as one model its serializer dumps whole, not as dicts it walks one by one
    (a copy of one mapping at a time in Python: ~9 ms of CPU at 1,000 items)."""
    walked: list[object] = []
    copy_mapping = sdk_prepare.copy_mapping

    def counted(mapping: Any, *args: Any, **kwargs: Any) -> Any:
        walked.append(mapping)
        return copy_mapping(mapping, *args, **kwargs)

    monkeypatch.setattr(sdk_prepare, "copy_mapping", counted)
    asked = request(long_conversation(200), tools=[ECHO])

    await bodies_sent(sdk_params(asked))

    assert len(walked) < 10  # the body, its system block and its cache marker
