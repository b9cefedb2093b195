"""The user's shapes benchmark: the parts its figures go through, without running it.

`make bench` runs it (a few minutes); these check the scripted fake's conversations,
the gaps kept apart by conversation, and the helpers that turn runs into figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest
import sqlalchemy as sa

from bench import fake_llm, user_shapes
from tests.fakes.messages_api import Reply, ToolUse


def _loop_body(name: str, requests: int, steps: int) -> dict[str, Any]:
    """A conversation of the loop `name` after `steps` tool calls."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": fake_llm.marker(name, loop=requests)}],
        }
    ]
    for n in range(steps):
        call = {"type": "tool_use", "id": f"t{n}", "name": "current_time", "input": {}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "now"}
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": messages}


def _tool_calls(step: object) -> list[ToolUse]:
    assert isinstance(step, Reply)
    return [b for b in step.blocks if isinstance(b, ToolUse)]


def test_a_loop_conversation_calls_a_tool_until_its_last_request() -> None:
    answers = [
        fake_llm.answer(_loop_body("a", 3, steps), "ok", "current_time", 0.0) for steps in range(3)
    ]

    assert [len(_tool_calls(a)) for a in answers] == [1, 1, 0]


def test_a_calls_conversation_makes_its_parallel_calls_once_then_answers() -> None:
    first = {"role": "user", "content": "Read. " + fake_llm.marker("b", calls=3, tool="TaskList")}
    body: dict[str, Any] = {"messages": [first]}

    calls = _tool_calls(fake_llm.answer(body, "ok", None, 0.0))
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "TaskList"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
    ]

    assert [c.name for c in calls] == ["TaskList"] * 3
    assert _tool_calls(fake_llm.answer(body, "ok", None, 0.0)) == []


def test_an_unmarked_conversation_is_answered_as_before() -> None:
    body = {"messages": [{"role": "user", "content": fake_llm.ONE_REQUEST}]}

    assert fake_llm.script_of(body) is None
    assert _tool_calls(fake_llm.answer(body, "ok", "current_time", 0.0)) == []


async def test_the_fake_keeps_each_conversations_moments_apart() -> None:
    """Two loops through the real SDK: each conversation's moments under its own name,
    with its first request."""
    fake = fake_llm.KeyedFake()
    fake.answering("ok", "current_time", 0.0, fake_llm.Requests())
    with fake:
        async with anthropic.AsyncAnthropic(
            api_key="test", base_url=fake.url, max_retries=0
        ) as client:
            for name, requests in (("one", 2), ("two", 3)):
                body = _loop_body(name, requests, 0)
                await user_shapes_loop(client, body, requests)
        taken = fake.take_keyed()

    assert {k: len(v) for k, v in taken["exchanges"].items()} == {"one": 2, "two": 3}
    assert set(taken["first"]) == {"one", "two"}
    assert fake.take_keyed() == {"exchanges": {}, "first": {}}


async def user_shapes_loop(
    client: anthropic.AsyncAnthropic, body: dict[str, Any], requests: int
) -> None:
    """The bare loop's way through a scripted loop: stream, answer each call, send on."""
    messages = body["messages"]
    for _ in range(requests):
        async with client.messages.stream(**user_shapes.sdk_params(body)) as stream:
            message = await stream.get_final_message()
        calls = [b for b in message.content if b.type == "tool_use"]
        if not calls:
            return
        messages.append({"role": "assistant", "content": [c.model_dump() for c in calls]})
        results = [{"type": "tool_result", "tool_use_id": c.id, "content": "now"} for c in calls]
        messages.append({"role": "user", "content": results})


def test_a_received_body_becomes_sdk_arguments_under_another_name() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "stream": True,
        "messages": [{"role": "user", "content": "[conv s1 loop 3]"}],
        "context_management": {"edits": []},
    }

    params = user_shapes.sdk_params(body, ("[conv s1 loop 3]", "[conv b2 loop 3]"))

    assert params == {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "[conv b2 loop 3]"}],
        "extra_body": {"context_management": {"edits": []}},
    }


def test_the_percentile_is_a_measured_value_by_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]

    assert user_shapes.percentile(values, 95) == 95.0
    assert user_shapes.percentile([3.0, 1.0, 2.0], 95) == 3.0
    assert user_shapes.percentile([7.0], 50) == 7.0


def test_the_percentile_refuses_no_values() -> None:
    with pytest.raises(ValueError, match="no values"):
        user_shapes.percentile([], 95)


def test_pairs_give_difference_and_ratio_run_by_run() -> None:
    pairs = user_shapes.Pairs()
    pairs.add(12.0, 5.0)
    pairs.add(10.0, 4.0)
    pairs.add(11.0, 5.5)

    assert pairs.difference("ms").values == (7.0, 6.0, 5.5)
    assert pairs.ratio().median == pytest.approx(2.4)


def test_unchanged_means_a_ratio_within_its_bound_either_way() -> None:
    assert user_shapes.within(1.19, 0.2)
    assert user_shapes.within(0.81, 0.2)
    assert not user_shapes.within(1.25, 0.2)
    assert not user_shapes.within(0.75, 0.2)


def test_gaps_within_a_window_are_those_that_overlap_it() -> None:
    # (arrived, written): gaps 1.0→1.1, 1.2→1.5, 1.6→2.0
    exchanges = [(1.5, 1.6), (0.9, 1.0), (1.1, 1.2), (2.0, 2.1)]

    assert user_shapes.gaps_within(exchanges, 1.3, 1.7) == pytest.approx([300.0, 400.0])


def test_a_seeded_shape_names_what_its_session_log_holds() -> None:
    fresh = user_shapes.Shape("`?wait=true`", wait=True, streams=False)
    items = user_shapes.Shape("`?wait=true`", wait=True, streams=False, before=user_shapes.ITEMS)
    tasks = user_shapes.Shape("`?wait=true`", wait=True, streams=False, before=user_shapes.TASK_OPS)

    assert fresh.session(10_000) == "fresh session"
    assert items.session(10_000) == "after 10,000 log items"
    assert tasks.session(1_000) == "after 1,000 task operations"


def test_each_pair_of_a_seeded_shape_gets_a_session_of_its_own() -> None:
    assert user_shapes.seeds_needed(user_shapes.SHAPES, 3) == {
        user_shapes.ITEMS: 3,
        user_shapes.TASK_OPS: 3,
    }


def test_the_seeded_shapes_run_with_wait_and_no_streams() -> None:
    seeded = [s for s in user_shapes.SHAPES if s.before]

    assert {s.before for s in seeded} == {user_shapes.ITEMS, user_shapes.TASK_OPS}
    assert all(s.wait and not s.streams for s in seeded)


async def test_seeded_sessions_are_the_keys_tenant_with_an_empty_current_segment(
    tmp_path: Path,
) -> None:
    """What the seeded rows' loops run on: the served tenant's sessions whose whole log
    lies before the current segment (so their requests are a fresh session's)."""
    needed = {user_shapes.ITEMS: 1, user_shapes.TASK_OPS: 1}

    seeded = await user_shapes.seed_sessions(tmp_path / "serve", needed, 40)

    url = user_shapes.database_url(tmp_path / "serve")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            for before, (session_id,) in seeded.items():
                tenant, last_seq, segment = conn.execute(
                    sa.text(
                        "SELECT tenant, last_seq, current_segment FROM sessions WHERE id = :id"
                    ),
                    {"id": session_id},
                ).one()
                in_segment = conn.execute(
                    sa.text("SELECT count(*) FROM items WHERE session_id = :id AND segment = :s"),
                    {"id": session_id, "s": segment},
                ).scalar_one()
                assert (before, tenant, in_segment) == (before, user_shapes.TENANT, 0)
                assert last_seq >= 40
    finally:
        engine.dispose()
