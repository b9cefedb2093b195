"""What the loop reports to its store (`TurnStore.record`), and the reminder it is given.

The loop reports each response once, as it arrives, and each step's tool results once,
after its calls ran; when the store writes them is its own business. A reminder is a
value the loop adds to one request and reports with that request's answer, never as an
item of the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from app.domain.items import AssistantMessage, ItemPayload, TextBlock, user_text
from app.engine.llm import Usage
from app.engine.loop import (
    CANCELLED,
    Answered,
    Reminder,
    ReminderSource,
    Results,
    TurnConfig,
    TurnOutcome,
    close_dangling_tool_uses,
    run_turn,
)
from app.engine.tools import Tool, ToolContext, ToolRegistry
from tests.engine.scripted import (
    InMemoryStore,
    RecordingEvents,
    ScriptedLLM,
    answer,
    call,
)

REMINDER = "<system-reminder>keep the list true</system-reminder>"
CTX = ToolContext(tenant="acme", session_id="s1", job_id="j1")


class Empty(BaseModel):
    pass


async def _look(ctx: ToolContext, args: Empty) -> str:
    return "looked"


def registry() -> ToolRegistry:
    return ToolRegistry([Tool("look", "Look.", Empty, _look, read_only=True)])


def config(reminder: ReminderSource | None = None) -> TurnConfig:
    return TurnConfig(
        model="test-model",
        system="You are terse.",
        tool_names=("look",),
        max_iterations=10,
        max_tokens=1000,
        reminder=reminder,
    )


def two_steps() -> ScriptedLLM:
    return ScriptedLLM(
        [
            answer(call("look", id="t1"), usage=Usage(input_tokens=7, output_tokens=2)),
            answer("Done.", usage=Usage(input_tokens=11, output_tokens=3)),
        ]
    )


async def run(
    llm: ScriptedLLM, store: InMemoryStore, reminder: ReminderSource | None = None
) -> TurnOutcome:
    return await run_turn(llm, store, registry(), CTX, config(reminder), RecordingEvents())


def answers(store: InMemoryStore) -> list[Answered]:
    return [step for step in store.steps if isinstance(step, Answered)]


class TurnEndStore(InMemoryStore):
    """A store that commits nothing before the turn ends: the steps it is told wait in
    its unit, which its segment reads like any transaction reads its own writes."""

    def __init__(self, payloads: Sequence[ItemPayload]) -> None:
        super().__init__(payloads)
        self.committed: list[ItemPayload] = list(payloads)

    def end(self) -> None:
        self.committed = list(self.payloads)


async def test_a_tool_step_is_recorded_as_its_answer_then_its_results() -> None:
    store = InMemoryStore([user_text("go")])

    await run(two_steps(), store)

    assert [type(step) for step in store.steps] == [Answered, Results, Answered]
    results = store.steps[1]
    assert isinstance(results, Results)
    assert [(r.tool_use_id, r.content) for r in results.results] == [("t1", "looked")]


async def test_each_answer_is_recorded_once_with_its_usage() -> None:
    store = InMemoryStore([user_text("go")])

    await run(two_steps(), store)

    assert [a.usage for a in answers(store)] == [
        Usage(input_tokens=7, output_tokens=2),
        Usage(input_tokens=11, output_tokens=3),
    ]


async def test_a_store_that_commits_only_at_the_turn_end_receives_the_same_steps() -> None:
    per_step = InMemoryStore([user_text("go")])
    at_end = TurnEndStore([user_text("go")])

    await run(two_steps(), per_step)
    await run(two_steps(), at_end)
    at_end.end()

    assert at_end.steps == per_step.steps
    assert at_end.committed == per_step.payloads


async def test_a_step_cancelled_before_its_calls_ran_still_records_its_results() -> None:
    """Empty: a store that keeps a response until its results come is told the step is
    over."""
    store = InMemoryStore([user_text("go")], cancel_after_appends=1)

    outcome = await run(ScriptedLLM([answer(call("look", id="t1"))]), store)

    assert outcome.status == "cancelled"
    assert [type(step) for step in store.steps] == [Answered, Results]
    assert store.steps[1] == Results(())


async def test_closing_unanswered_calls_records_their_results_in_one_step() -> None:
    calls = AssistantMessage(content=[call("look", id="t1"), call("look", id="t2")])
    store = InMemoryStore([user_text("go"), calls])

    await close_dangling_tool_uses(store, CANCELLED)

    [step] = store.steps
    assert isinstance(step, Results)
    assert [(r.tool_use_id, r.content) for r in step.results] == [
        ("t1", CANCELLED),
        ("t2", CANCELLED),
    ]


async def test_a_reminders_text_ends_the_request_it_is_due_on_as_a_volatile_block() -> None:
    llm = two_steps()

    await run(llm, InMemoryStore([user_text("go")]), lambda items: Reminder(REMINDER))

    first = llm.requests[0]
    assert first.messages[-1].content[-1] == TextBlock(text=REMINDER)
    assert first.volatile_blocks == 1


async def test_a_reminder_is_never_recorded() -> None:
    store = InMemoryStore([user_text("go")])

    await run(two_steps(), store, lambda items: Reminder(REMINDER))

    assert all(REMINDER not in repr(step) for step in store.steps)
    assert all(REMINDER not in repr(payload) for payload in store.payloads)


async def test_the_answer_to_a_reminded_request_is_recorded_as_reminded() -> None:
    store = InMemoryStore([user_text("go")])
    due = iter([Reminder(REMINDER), None])

    await run(two_steps(), store, lambda items: next(due))

    assert [a.reminded for a in answers(store)] == [True, False]


async def test_a_reminder_without_text_adds_nothing_and_counts_as_shown() -> None:
    """Due while the whole task list is in the request already."""
    llm = ScriptedLLM([answer("Done.")])
    store = InMemoryStore([user_text("go")])

    await run(llm, store, lambda items: Reminder(None))

    [sent] = llm.requests
    assert (sent.messages[-1].content, sent.volatile_blocks) == ((TextBlock(text="go"),), 0)
    assert [a.reminded for a in answers(store)] == [True]


async def test_the_reminder_is_asked_with_the_segment_the_request_is_built_from() -> None:
    seen: list[list[ItemPayload]] = []

    def reminder(items: Sequence[ItemPayload]) -> Reminder | None:
        seen.append(list(items))
        return None

    await run(two_steps(), InMemoryStore([user_text("go")]), reminder)

    assert [[p.kind for p in items] for items in seen] == [
        ["user_message"],
        ["user_message", "assistant_message", "tool_result"],
    ]
