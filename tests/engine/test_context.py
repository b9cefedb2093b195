"""The context manager (seed 004): the estimate before each request, the thresholds it
crosses, once per movement, and the size of a request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.items import ImageBlock, TextBlock, ToolUseBlock
from app.engine import context
from app.engine.context import (
    BLOCK_OVERHEAD_CHARS,
    IMAGE_CHARS,
    ContextAction,
    ContextManager,
    Refusal,
    RequestSizer,
    Thresholds,
    WindowLimit,
    refusal_of,
    request_chars,
)
from app.engine.llm import LLMRequest, Message, ToolResultBlock, ToolSpec

ORDER: list[ContextAction] = ["warn", "prompt", "force_transition", "exhausted"]


def manager(window: int = 1000) -> ContextManager:
    return ContextManager(window, Thresholds())


def measured(tokens: int, window: int = 1000) -> ContextManager:
    """A manager whose last request (of 0 characters) cost `tokens`."""
    cm = manager(window)
    cm.answered(0, tokens)
    return cm


def test_defaults_are_the_seeds_thresholds() -> None:
    assert Thresholds() == Thresholds(warn=0.70, prompt=0.85, force=0.95, exhausted=0.99)


def test_below_warn_nothing_fires() -> None:
    check = measured(699).check(0)
    assert check.crossed == ()
    assert check.ratio == pytest.approx(0.699)


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (700, ["warn"]),
        (850, ["warn", "prompt"]),
        (950, ["warn", "prompt", "force_transition"]),
        (990, ORDER),
    ],
)
def test_each_threshold_is_inclusive(tokens: int, expected: list[ContextAction]) -> None:
    assert list(measured(tokens).check(0).crossed) == expected


def test_the_estimate_is_the_last_usage_plus_what_was_added_since() -> None:
    cm = manager()
    cm.answered(2_000, 600)  # a request of 2,000 characters cost 600 tokens
    assert cm.estimate(2_000) == 600
    assert cm.estimate(2_401) == 600 + 101  # 401 characters added: rounded up
    assert cm.available_tokens(2_401) == 1000 - 701


def test_before_any_answer_the_characters_alone_are_estimated() -> None:
    cm = ContextManager(1000, Thresholds(), chars_per_token=4.0)
    assert cm.estimate(2_800) == 700
    assert list(cm.check(2_800).crossed) == ["warn"]
    assert cm.estimate(3_401) == 851  # rounded up: an estimate should not under-count


def test_a_usage_below_what_the_characters_say_does_not_lower_the_estimate() -> None:
    cm = manager()
    cm.answered(8_000, 100)
    assert cm.estimate(8_000) == 2_000


def test_without_usage_the_estimate_stands_in_for_it() -> None:
    cm = manager()
    cm.answered(2_000, None)
    assert cm.estimate(2_400) == 600
    cm.answered(2_400, 0)
    assert cm.estimate(2_400) == 600


def test_the_estimate_uses_the_given_chars_per_token() -> None:
    cm = ContextManager(1000, Thresholds(), chars_per_token=2.0)
    assert list(cm.check(1_900).crossed) == ["warn", "prompt", "force_transition"]


def test_a_jump_returns_every_action_crossed_in_order() -> None:
    cm = measured(500)
    assert cm.check(0).crossed == ()
    cm.answered(0, 970)
    check = cm.check(0)
    assert list(check.crossed) == ["warn", "prompt", "force_transition"]
    assert cm.at_force(check.ratio) and not cm.too_full(check.ratio)


def test_each_action_fires_once_per_movement() -> None:
    cm = manager()
    steps = [(710, ["warn"]), (720, []), (860, ["prompt"]), (100, []), (900, [])]
    for tokens, expected in steps:
        cm.answered(0, tokens)
        assert list(cm.check(0).crossed) == expected
    cm.answered(0, 999)
    check = cm.check(0)
    assert list(check.crossed) == ["force_transition", "exhausted"]
    assert cm.too_full(check.ratio)
    assert cm.fired == frozenset(ORDER)
    cm.answered(0, 1000)
    assert cm.check(0).crossed == ()


def test_actions_fired_before_a_resume_do_not_fire_again() -> None:
    cm = measured(960)
    cm.already_fired(["warn", "prompt", "not-an-action"])
    assert list(cm.check(0).crossed) == ["force_transition"]
    assert cm.fired == frozenset({"warn", "prompt", "force_transition"})


def test_a_restart_forgets_the_measure_and_fires_again() -> None:
    cm = measured(800)
    assert list(cm.check(0).crossed) == ["warn"]
    cm.restart()
    assert cm.estimate(400) == 100
    assert list(cm.check(3_200).crossed) == ["warn"]


def test_available_tokens_is_the_rest_of_the_window_never_negative() -> None:
    assert manager().available_tokens(0) == 1000
    assert measured(400).available_tokens(0) == 600
    assert measured(1200).available_tokens(0) == 0


def test_custom_thresholds_are_honoured() -> None:
    cm = ContextManager(100, Thresholds(warn=0.5, prompt=0.6, force=0.7, exhausted=0.8))
    cm.answered(0, 65)
    assert list(cm.check(0).crossed) == ["warn", "prompt"]


@pytest.mark.parametrize(
    "values",
    [(0.0, 0.85, 0.95, 0.99), (0.9, 0.85, 0.95, 0.99), (0.7, 0.85, 0.99, 0.95)],
)
def test_out_of_order_thresholds_are_refused(values: tuple[float, float, float, float]) -> None:
    warn, prompt, force, exhausted = values
    with pytest.raises(ValueError, match="thresholds"):
        Thresholds(warn=warn, prompt=prompt, force=force, exhausted=exhausted)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        ContextManager(0, Thresholds())
    with pytest.raises(ValueError):
        ContextManager(100, Thresholds(), chars_per_token=0)
    with pytest.raises(ValueError):
        manager().answered(0, -1)


def test_a_requests_size_counts_what_the_model_reads_and_its_framing() -> None:
    schema = {"type": "object"}
    request = LLMRequest(
        model="m",
        system="Be brief.",
        messages=[
            Message(role="user", content=[TextBlock(text="hello"), ImageBlock(source={})]),
            Message(role="assistant", content=[ToolUseBlock(id="t1", name="echo", input={})]),
            Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="hi")]),
        ],
        tools=[ToolSpec(name="echo", description="Echo.", input_schema=schema)],
    )
    framing = BLOCK_OVERHEAD_CHARS * (3 + 4 + 1)  # messages, blocks, tools
    content = len("Be brief.") + 5 + IMAGE_CHARS + len("echo{}") + 2
    tool = len("echo") + len("Echo.") + len('{"type":"object"}')
    assert request_chars(request) == framing + content + tool


def _growing_requests() -> list[LLMRequest]:
    """A turn's requests: each shares the messages of the one before and adds some; one
    has its last user message replaced (as the reminder does), one drops a tool."""
    tools = [
        ToolSpec(name="echo", description="Echo.", input_schema={"type": "object"}),
        ToolSpec(name="read", description="Read a file.", input_schema={"type": "object"}),
    ]
    messages: list[Message] = [Message(role="user", content=[TextBlock(text="start")])]
    requests = [LLMRequest(model="m", system="s", messages=list(messages), tools=tools)]
    for step in range(4):
        use = ToolUseBlock(id=f"t{step}", name="echo", input={"n": step})
        messages.append(Message(role="assistant", content=[use]))
        result = ToolResultBlock(tool_use_id=f"t{step}", content="x" * step)
        messages.append(Message(role="user", content=[result]))
        requests.append(LLMRequest(model="m", system="s", messages=list(messages), tools=tools))
    reminded = [*messages[:-1], Message(role="user", content=[TextBlock(text="reminder")])]
    requests.append(LLMRequest(model="m", system=None, messages=reminded, tools=tools[:1]))
    return requests


def test_a_sizer_counts_each_request_as_counting_it_afresh_would() -> None:
    sizer = RequestSizer()

    assert [sizer.chars(r) for r in _growing_requests()] == [
        request_chars(r) for r in _growing_requests()
    ]


def test_a_sizer_counts_only_the_messages_it_has_not_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[Message] = []
    count = context._message_chars

    def counting(message: Message) -> int:
        counted.append(message)
        return count(message)

    monkeypatch.setattr(context, "_message_chars", counting)
    requests = _growing_requests()
    sizer = RequestSizer()
    for request in requests:
        sizer.chars(request)

    distinct = {id(m): m for r in requests for m in r.messages}
    assert len(counted) == len(distinct)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1500), max_size=30))
def test_over_any_sequence_each_action_fires_once_in_order(usages: list[int]) -> None:
    cm = manager()
    fired: list[ContextAction] = []
    peak = 0
    for tokens in usages:
        cm.answered(0, tokens)
        fired.extend(cm.check(0).crossed)
        peak = max(peak, tokens)
    expected = [a for a, t in Thresholds().ordered() if peak / 1000 >= t]
    assert fired == expected


def test_a_refusal_for_size_gives_the_prompts_real_tokens() -> None:
    too_long = "Error code: 400 - {'message': 'prompt is too long: 208310 tokens > 200000 maximum'}"
    with_output = (
        "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again"
    )
    assert refusal_of(too_long) == Refusal(tokens=208_310, window=200_000)
    assert refusal_of(with_output) == Refusal(tokens=195_000, window=200_000)
    assert refusal_of("messages.0: all messages must have non-empty content") is None


def test_after_a_refusal_the_estimate_counts_as_densely_as_the_api_did() -> None:
    cm = manager(window=10_000)
    cm.refused(8_000, 4_000)  # 8,000 characters were 4,000 tokens: 2 a token
    assert cm.estimate(8_000) == 4_000
    cm.restart()  # a compaction keeps what was learnt
    assert cm.estimate(1_000) == 500


def test_a_refusal_naming_a_smaller_window_makes_it_the_window() -> None:
    """A configured window above the API's: the refused request measures 43% of it and
    would go out again unchanged. Against the API's maximum it is over the force threshold."""
    cm = manager(window=500_000)
    cm.refused(860_000, 215_000, window=200_000)
    check = cm.check(860_000)
    assert cm.window_tokens == 200_000
    assert cm.at_force(check.ratio) and cm.too_full(check.ratio)


def test_the_window_a_process_learns_only_ever_narrows() -> None:
    limit = WindowLimit(1_000_000)
    limit.learn(200_000)
    limit.learn(400_000)  # a larger maximum (another model) does not widen it again
    limit.learn(None)
    assert limit.tokens == 200_000
