"""The agent loop over in-memory ports: no database, no HTTP, a scripted LLM."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.domain.items import (
    AssistantMessage,
    ItemPayload,
    Origin,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
    user_text,
)
from app.engine.llm import LLMRequest, Message, ToolResultBlock, Usage
from app.engine.loop import (
    CANCELLED,
    INTERRUPTED,
    Answered,
    Interceptor,
    TurnConfig,
    TurnOutcome,
    close_dangling_tool_uses,
    run_turn,
)
from app.engine.requests import unanswered_tool_uses, with_text_at_end
from app.engine.tools import Tool, ToolContext, ToolError, ToolRegistry
from tests.engine.scripted import InMemoryStore, RecordingEvents, ScriptedLLM, answer, call

REMINDER = "<system-reminder>x</system-reminder>"
SYSTEM = "You are terse."


class EchoInput(BaseModel):
    text: str


class Empty(BaseModel):
    pass


class Harness:
    """A registry whose tools note every call they run, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.while_echoing: Callable[[], None] | None = None
        self.tools = ToolRegistry(
            [
                Tool("echo", "Repeat the text.", EchoInput, self._echo),
                Tool("boom", "Always crashes.", Empty, self._boom),
                Tool("refuse", "Always refuses.", Empty, self._refuse),
            ]
        )

    async def _echo(self, ctx: ToolContext, args: EchoInput) -> str:
        self.ran.append(args.text)
        if self.while_echoing is not None:
            self.while_echoing()
        return args.text

    async def _boom(self, ctx: ToolContext, args: Empty) -> str:
        self.ran.append("boom")
        raise RuntimeError("the disk is on fire")

    async def _refuse(self, ctx: ToolContext, args: Empty) -> str:
        self.ran.append("refuse")
        raise ToolError("not allowed here")


CTX = ToolContext(tenant="acme", session_id="s1", job_id="j1")


def config(*, max_iterations: int = 10, interceptors: tuple[Interceptor, ...] = ()) -> TurnConfig:
    return TurnConfig(
        model="test-model",
        system=SYSTEM,
        tool_names=("echo", "boom", "refuse"),
        max_iterations=max_iterations,
        max_tokens=1000,
        interceptors=interceptors,
    )


async def run(
    llm: ScriptedLLM,
    store: InMemoryStore,
    harness: Harness | None = None,
    cfg: TurnConfig | None = None,
    events: RecordingEvents | None = None,
) -> TurnOutcome:
    return await run_turn(
        llm,
        store,
        (harness or Harness()).tools,
        CTX,
        cfg or config(),
        events or RecordingEvents(),
    )


def snapshot(payloads: list[ItemPayload]) -> list[dict[str, Any]]:
    return [p.model_dump(mode="json") for p in payloads]


def kinds(store: InMemoryStore) -> list[str]:
    return [p.kind for p in store.payloads]


def results(store: InMemoryStore) -> list[ToolResult]:
    return [p for p in store.payloads if isinstance(p, ToolResult)]


def all_text(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


# ------------------------------------------------------------------------- plain answers


async def test_plain_text_answer_ends_the_turn_after_one_call() -> None:
    llm = ScriptedLLM([answer("Hello there.")])
    store = InMemoryStore([user_text("hi")])

    outcome = await run(llm, store)

    assert outcome.status == "completed"
    assert outcome.final_text == "Hello there."
    assert outcome.iterations == 1
    assert len(llm.requests) == 1
    assert kinds(store) == ["user_message", "assistant_message"]
    [appended] = store.appended
    assert appended.origin is Origin.llm
    assert appended.usage == Usage(input_tokens=10, output_tokens=5)
    llm.assert_all_consumed()


async def test_the_request_carries_model_system_tools_and_the_log() -> None:
    llm = ScriptedLLM([answer("ok")])
    store = InMemoryStore([user_text("hi")])

    await run(llm, store)

    [request] = llm.requests
    assert (request.model, request.system, request.max_tokens) == ("test-model", SYSTEM, 1000)
    assert [t.name for t in request.tools] == ["echo", "boom", "refuse"]
    assert request.messages == [Message(role="user", content=[TextBlock(text="hi")])]


async def test_streamed_text_reaches_the_events_as_it_arrives() -> None:
    llm = ScriptedLLM([answer("Hello there.")])
    events = RecordingEvents()

    await run(llm, InMemoryStore([user_text("hi")]), events=events)

    assert len(events.deltas) == 2
    assert "".join(events.deltas) == "Hello there."


async def test_final_text_joins_the_text_blocks_of_the_last_answer() -> None:
    llm = ScriptedLLM([answer("One. ", "Two.")])

    outcome = await run(llm, InMemoryStore([user_text("hi")]))

    assert outcome.final_text == "One. Two."


# -------------------------------------------------------------------------------- tools


async def test_tool_calls_run_in_order_each_result_right_after_its_assistant_message() -> None:
    llm = ScriptedLLM(
        [
            answer("Let me echo.", call("echo", {"text": "first"}, id="t1")),
            answer(call("echo", {"text": "second"}, id="t2")),
            answer("Done."),
        ]
    )
    store = InMemoryStore([user_text("go")])
    harness = Harness()

    outcome = await run(llm, store, harness)

    assert outcome.status == "completed"
    assert outcome.final_text == "Done."
    assert outcome.iterations == 3
    assert harness.ran == ["first", "second"]
    assert kinds(store) == [
        "user_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
        "tool_result",
        "assistant_message",
    ]
    first, second = results(store)
    assert (first.tool_use_id, first.content, first.is_error) == ("t1", "first", False)
    assert (second.tool_use_id, second.content, second.is_error) == ("t2", "second", False)
    assert [a.origin for a in store.appended] == [
        Origin.llm,
        Origin.system,
        Origin.llm,
        Origin.system,
        Origin.llm,
    ]
    llm.assert_all_consumed()


async def test_several_tool_calls_in_one_response_all_run_in_order() -> None:
    llm = ScriptedLLM(
        [
            answer(
                call("echo", {"text": "a"}, id="t1"),
                call("echo", {"text": "b"}, id="t2"),
                call("echo", {"text": "c"}, id="t3"),
            ),
            answer("Done."),
        ]
    )
    store = InMemoryStore([user_text("go")])
    harness = Harness()

    await run(llm, store, harness)

    assert harness.ran == ["a", "b", "c"]
    assert kinds(store)[1:5] == ["assistant_message"] + ["tool_result"] * 3
    assert [r.tool_use_id for r in results(store)] == ["t1", "t2", "t3"]


async def test_the_next_request_sends_all_results_in_one_user_message() -> None:
    llm = ScriptedLLM(
        [
            answer(call("echo", {"text": "a"}, id="t1"), call("echo", {"text": "b"}, id="t2")),
            answer("Done."),
        ]
    )

    await run(llm, InMemoryStore([user_text("go")]))

    last = llm.requests[1].messages[-1]
    assert last.role == "user"
    assert last.content == (
        ToolResultBlock(tool_use_id="t1", content="a"),
        ToolResultBlock(tool_use_id="t2", content="b"),
    )


async def test_tool_events_bracket_each_call() -> None:
    llm = ScriptedLLM(
        [
            answer(call("echo", {"text": "a"}, id="t1"), call("echo", {"text": "b"}, id="t2")),
            answer("Done."),
        ]
    )
    events = RecordingEvents()

    await run(llm, InMemoryStore([user_text("go")]), events=events)

    tool_events = [e for e in events.log if e[0] != "text"]
    assert tool_events == [
        ("started", "t1"),
        ("finished", "t1"),
        ("started", "t2"),
        ("finished", "t2"),
    ]
    assert [output.content for _, output in events.finished] == ["a", "b"]


async def test_the_usage_of_every_call_is_summed_in_the_outcome() -> None:
    llm = ScriptedLLM(
        [
            answer(
                call("echo", {"text": "a"}, id="t1"),
                usage=Usage(input_tokens=100, output_tokens=10, cache_creation_input_tokens=90),
            ),
            answer(
                "Done.",
                usage=Usage(input_tokens=20, output_tokens=7, cache_read_input_tokens=90),
            ),
        ]
    )

    outcome = await run(llm, InMemoryStore([user_text("go")]))

    assert outcome.usage == Usage(
        input_tokens=120,
        output_tokens=17,
        cache_read_input_tokens=90,
        cache_creation_input_tokens=90,
    )


@pytest.mark.parametrize(
    ("tool_use", "expected"),
    [
        pytest.param(call("echo", {}, id="t1"), "invalid input for echo: text", id="invalid"),
        pytest.param(call("nope", {}, id="t1"), "unknown tool 'nope'", id="unknown"),
        pytest.param(
            call("boom", {}, id="t1"), "boom failed: RuntimeError: the disk", id="exception"
        ),
        pytest.param(call("refuse", {}, id="t1"), "not allowed here", id="tool-error"),
    ],
)
async def test_a_failing_tool_call_becomes_an_error_result_and_the_loop_continues(
    tool_use: ToolUseBlock, expected: str
) -> None:
    llm = ScriptedLLM([answer(tool_use), answer("Sorry about that.")])
    store = InMemoryStore([user_text("go")])

    outcome = await run(llm, store)

    assert outcome.status == "completed"
    assert outcome.final_text == "Sorry about that."
    [result] = results(store)
    assert result.is_error
    assert result.tool_use_id == "t1"
    assert isinstance(result.content, str)
    assert expected in result.content
    sent = llm.requests[1].messages[-1].content
    assert sent == (ToolResultBlock(tool_use_id="t1", content=result.content, is_error=True),)
    llm.assert_all_consumed()


# ------------------------------------------------------------------------------- limits


async def test_max_iterations_stops_the_turn_with_every_tool_use_answered() -> None:
    llm = ScriptedLLM(
        [
            answer(call("echo", {"text": "a"}, id="t1")),
            answer(call("echo", {"text": "b"}, id="t2"), call("echo", {"text": "c"}, id="t3")),
        ]
    )
    store = InMemoryStore([user_text("go")])

    outcome = await run(llm, store, cfg=config(max_iterations=2))

    assert outcome.status == "max_iterations"
    assert outcome.iterations == 2
    assert unanswered_tool_uses(store.payloads) == []
    assert [r.tool_use_id for r in results(store)] == ["t1", "t2", "t3"]
    llm.assert_all_consumed()


async def test_a_cancel_requested_before_the_turn_makes_no_call() -> None:
    llm = ScriptedLLM()
    store = InMemoryStore([user_text("go")])
    store.cancel = True

    outcome = await run(llm, store)

    assert outcome.status == "cancelled"
    assert outcome.iterations == 0
    assert llm.requests == []
    assert store.appended == []


async def test_a_cancel_requested_before_the_next_request_returns_cancelled() -> None:
    llm = ScriptedLLM([answer(call("echo", {"text": "a"}, id="t1"))])
    # The assistant message and the one tool result, then the cancel arrives.
    store = InMemoryStore([user_text("go")], cancel_after_appends=2)

    outcome = await run(llm, store)

    assert outcome.status == "cancelled"
    assert outcome.iterations == 1
    assert kinds(store) == ["user_message", "assistant_message", "tool_result"]
    llm.assert_all_consumed()


async def test_a_cancel_during_tool_calls_leaves_the_later_calls_unrun() -> None:
    llm = ScriptedLLM(
        [
            answer(
                call("echo", {"text": "a"}, id="t1"),
                call("echo", {"text": "b"}, id="t2"),
                call("echo", {"text": "c"}, id="t3"),
            )
        ]
    )
    store = InMemoryStore([user_text("go")])
    harness = Harness()
    harness.while_echoing = lambda: setattr(store, "cancel", True)  # cancel during tool a

    outcome = await run(llm, store, harness)

    assert outcome.status == "cancelled"
    assert harness.ran == ["a"]
    # the result of the tool that ran is kept; the calls after the cancel have none
    assert [b.id for b in unanswered_tool_uses(store.payloads)] == ["t2", "t3"]
    llm.assert_all_consumed()


async def test_closing_dangling_tool_uses_after_a_cancel_gives_them_error_results() -> None:
    llm = ScriptedLLM(
        [
            answer(
                call("echo", {"text": "a"}, id="t1"),
                call("echo", {"text": "b"}, id="t2"),
                call("echo", {"text": "c"}, id="t3"),
            )
        ]
    )
    store = InMemoryStore([user_text("go")])
    harness = Harness()
    harness.while_echoing = lambda: setattr(store, "cancel", True)  # cancel during tool a
    await run(llm, store, harness)

    await close_dangling_tool_uses(store, CANCELLED)

    assert unanswered_tool_uses(store.payloads) == []
    closed = results(store)[1:]
    assert [(r.tool_use_id, r.content, r.is_error) for r in closed] == [
        ("t2", CANCELLED, True),
        ("t3", CANCELLED, True),
    ]
    assert [a.origin for a in store.appended[-2:]] == [Origin.system, Origin.system]


# ----------------------------------------------------------------------------- resuming


async def test_resuming_answers_an_unanswered_tool_use_as_interrupted_then_continues() -> None:
    llm = ScriptedLLM([answer("Picking up again.")])
    store = InMemoryStore(
        [
            user_text("go"),
            AssistantMessage(content=[call("echo", {"text": "a"}, id="t1")]),
        ]
    )
    harness = Harness()

    outcome = await run(llm, store, harness)

    assert outcome.status == "completed"
    assert outcome.final_text == "Picking up again."
    assert harness.ran == []
    first = store.appended[0]
    assert first.origin is Origin.system
    assert isinstance(first.payload, ToolResult)
    assert (first.payload.tool_use_id, first.payload.content, first.payload.is_error) == (
        "t1",
        INTERRUPTED,
        True,
    )
    assert llm.requests[0].messages[-1].content == (
        ToolResultBlock(tool_use_id="t1", content=INTERRUPTED, is_error=True),
    )
    llm.assert_all_consumed()


async def test_resuming_interrupts_only_the_tool_uses_without_a_result() -> None:
    llm = ScriptedLLM([answer("ok")])
    store = InMemoryStore(
        [
            user_text("go"),
            AssistantMessage(
                content=[
                    call("echo", {"text": "a"}, id="t1"),
                    call("echo", {"text": "b"}, id="t2"),
                ]
            ),
            ToolResult(tool_use_id="t1", content="a"),
        ]
    )

    await run(llm, store)

    interrupted = [r for r in results(store) if r.is_error]
    assert [r.tool_use_id for r in interrupted] == ["t2"]


async def test_a_turn_that_is_already_answered_makes_no_call() -> None:
    llm = ScriptedLLM()
    store = InMemoryStore(
        [user_text("go"), AssistantMessage(content=[TextBlock(text="Already done.")])]
    )

    outcome = await run(llm, store)

    assert outcome.status == "completed"
    assert outcome.final_text == "Already done."
    assert outcome.iterations == 0
    assert llm.requests == []
    assert store.appended == []


# -------------------------------------------------------------------------- interceptors


def remind(*, times: int | None = None) -> tuple[Interceptor, list[int]]:
    """An interceptor that changes the system prompt and adds a reminder to the last user
    message (`times` times), returning the changed request."""
    calls: list[int] = []

    async def intercept(request: LLMRequest) -> LLMRequest:
        calls.append(1)
        if times is None or len(calls) <= times:
            messages = with_text_at_end(request.messages, REMINDER)
            return dataclasses.replace(request, system="changed system", messages=messages)
        return request

    return intercept, calls


def two_step_llm() -> ScriptedLLM:
    return ScriptedLLM([answer(call("echo", {"text": "a"}, id="t1")), answer("Done.")])


async def test_an_interceptor_changes_what_the_llm_sees() -> None:
    intercept, _ = remind(times=1)
    llm = two_step_llm()

    await run(llm, InMemoryStore([user_text("hi")]), cfg=config(interceptors=(intercept,)))

    first = llm.requests[0]
    assert first.system == "changed system"
    assert first.messages[-1].content == (TextBlock(text="hi"), TextBlock(text=REMINDER))


async def test_an_interceptor_cannot_change_the_stored_history() -> None:
    intercept, _ = remind()
    llm = two_step_llm()
    seed: list[ItemPayload] = [user_text("hi")]
    store = InMemoryStore(seed)
    before = snapshot(seed)

    await run(llm, store, cfg=config(interceptors=(intercept,)))

    assert snapshot(store.payloads[: len(before)]) == before
    assert all(REMINDER not in str(p.model_dump()) for p in store.payloads)
    user = store.payloads[0]
    assert isinstance(user, UserMessage)
    assert user.content == [TextBlock(text="hi")]


async def test_the_next_request_does_not_carry_an_earlier_interception() -> None:
    intercept, calls = remind(times=1)
    llm = two_step_llm()

    await run(llm, InMemoryStore([user_text("hi")]), cfg=config(interceptors=(intercept,)))

    assert len(calls) == 2
    second = llm.requests[1]
    assert second.system == SYSTEM
    assert all(REMINDER not in all_text(m) for m in second.messages)
    assert second.messages[0].content == (TextBlock(text="hi"),)


async def test_an_interceptor_that_fires_every_time_adds_its_text_once_per_request() -> None:
    intercept, _ = remind()
    llm = two_step_llm()

    await run(llm, InMemoryStore([user_text("hi")]), cfg=config(interceptors=(intercept,)))

    second = llm.requests[1]
    assert sum(all_text(m).count(REMINDER) for m in second.messages) == 1
    assert second.messages[-1].content[-1] == TextBlock(text=REMINDER)
    assert isinstance(second.messages[-1].content[0], ToolResultBlock)


async def test_an_interceptor_cannot_edit_a_message_or_block_in_place() -> None:
    refused: list[type[Exception]] = []

    async def rewrite(request: LLMRequest) -> LLMRequest:
        message = request.messages[0]
        block = message.content[0]
        assert isinstance(block, TextBlock)
        for edit in (
            lambda: setattr(block, "text", "rewritten"),
            lambda: message.content.append(TextBlock(text="extra")),  # type: ignore[attr-defined]
            lambda: setattr(message, "role", "assistant"),
        ):
            with pytest.raises((ValidationError, AttributeError)) as caught:
                edit()
            refused.append(caught.type)
        return request

    llm = two_step_llm()
    seed: list[ItemPayload] = [user_text("hi")]
    store = InMemoryStore(seed)
    before = snapshot(seed)

    await run(llm, store, cfg=config(interceptors=(rewrite,)))

    assert len(refused) == 6  # three edits refused in each of the two requests
    assert snapshot(store.payloads[: len(before)]) == before
    assert llm.requests[1].messages[0].content == (TextBlock(text="hi"),)


LOOK = dataclasses.replace(config(), tool_names=("look",))


def logged_when_run(store: InMemoryStore, *, read_only: bool) -> tuple[ToolRegistry, list[bool]]:
    """A registry of one tool, `look`, that notes whether its call's response was in the
    store when it ran."""
    seen: list[bool] = []

    async def look(ctx: ToolContext, args: Empty) -> str:
        seen.append(any(isinstance(p, AssistantMessage) for p in store.payloads))
        return "looked"

    return ToolRegistry([Tool("look", "Look.", Empty, look, read_only=read_only)]), seen


async def test_a_response_whose_calls_only_read_is_recorded_as_changing_nothing() -> None:
    """Its store may keep it until their results come (one write for the step)."""
    llm = ScriptedLLM([answer(call("look", id="t1"), call("look", id="t2")), answer("Done.")])
    store = InMemoryStore([user_text("go")])
    tools, _ = logged_when_run(store, read_only=True)

    outcome = await run_turn(llm, store, tools, CTX, LOOK, RecordingEvents())

    first = store.steps[0]
    assert outcome.status == "completed"
    assert isinstance(first, Answered) and not first.calls_change
    assert kinds(store) == [
        "user_message", "assistant_message", "tool_result", "tool_result", "assistant_message"
    ]  # fmt: skip


async def test_a_call_that_changes_something_runs_after_its_response_was_recorded() -> None:
    llm = ScriptedLLM([answer(call("look", id="t1")), answer("Done.")])
    store = InMemoryStore([user_text("go")])
    tools, seen = logged_when_run(store, read_only=False)

    await run_turn(llm, store, tools, CTX, LOOK, RecordingEvents())

    first = store.steps[0]
    assert seen == [True]
    assert isinstance(first, Answered) and first.calls_change


def test_a_tool_the_registry_does_not_hold_only_reads() -> None:
    """Its call runs nothing (the model is told the tool is unknown)."""
    writes = Tool("writes", "Writes.", Empty, lambda ctx, args: _never())
    reads = dataclasses.replace(writes, name="reads", read_only=True)
    registry = ToolRegistry([writes, reads])

    assert [registry.only_reads(n) for n in ("writes", "reads", "missing")] == [False, True, True]


async def _never() -> str:
    raise AssertionError("not called")
