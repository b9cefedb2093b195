"""Property: whatever a chat does — text answers, parallel tool calls with large
results, `Detail` look-ups of the whole session so far, task writes, usage that jumps,
REST task changes, compactions by hand or forced by the window — every request Strata
sends is one the real Messages API accepts, and under 99% of the window.

Hypothesis draws the sessions; the validating fake judges every request (shape,
pairing, tools, size as it counts tokens) and the test adds the 99% bound. A turn may
fail only with `context-exhausted`, never with a request the API refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.engine.compaction import SUMMARY_SYSTEM
from app.settings import Settings
from app.tools.detail import detail_tool
from tests.fakes.messages_api import Block, FakeMessagesAPI, Step, count_tokens, reply, tool_use
from tests.support.apps import serve
from tests.support.chat import assert_log_consistent, items, new_session
from tests.support.tools import agent_tools

WINDOW = 3_000


def _call(kind: str, size: int) -> Block:
    if kind == "echo":
        return tool_use("echo", {"text": "e" * size})
    if kind == "repeat":
        return tool_use("repeat", {"text": "abc ", "times": size * 10})
    if kind == "create":
        return tool_use("TaskCreate", {"subject": f"task of {size}"})
    if kind == "update":
        return tool_use("TaskUpdate", {"taskid": 1, "status": "inprogress"})
    if kind == "detail":  # every earlier turn of the day: tool outputs of thousands of chars
        return tool_use("Detail", {"time": "00:00-23:59", "offset": size if size > 300 else 0})
    return tool_use("TaskList", {})


CALLS = st.lists(
    st.tuples(
        st.sampled_from(["echo", "repeat", "create", "update", "list", "detail"]),
        st.integers(min_value=1, max_value=400),
    ),
    min_size=1,
    max_size=4,
)
USAGE = st.one_of(st.none(), st.floats(min_value=0.3, max_value=1.05))
STEP = st.one_of(
    st.tuples(st.just("text"), st.integers(min_value=1, max_value=1_500), USAGE),
    st.tuples(st.just("tools"), CALLS, USAGE),
)
TURN = st.tuples(
    st.lists(STEP, max_size=5),
    st.sampled_from(["none", "compact", "rest-task"]),
)


def _step(plan: tuple[Any, ...]) -> Step:
    kind, body, ratio = plan
    usage = None if ratio is None else {"input_tokens": int(WINDOW * ratio), "output_tokens": 9}
    if kind == "text":
        return reply("w" * body, usage=usage)
    return reply(*(_call(k, size) for k, size in body), usage=usage)


@pytest.fixture
async def validity_client(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> AsyncIterator[httpx.AsyncClient]:
    built: Settings = make_settings(
        anthropic_base_url=fake_llm.url,
        context_window_tokens=WINDOW,
        llm_max_retries=0,
        worker_poll_seconds=0.05,
        reminder_requests_since_task_write=2,
        reminder_requests_between_reminders=2,
        tool_result_min_tokens=100,
    )
    tools = agent_tools()
    tools.register(detail_tool())
    # one app for all the examples: each draws a session of its own
    async with serve(built, tools=tools) as (_, client):
        yield client


class Script:
    """The model: summary requests get a summary; others the turn's next planned step,
    and once those are used up, the answer that ends the turn."""

    def __init__(self) -> None:
        self.steps: deque[Step] = deque()

    def __call__(self, body: dict[str, Any]) -> Step:
        if SUMMARY_SYSTEM in str(body.get("system")):
            return reply("SUMMARY: the session so far.")
        return self.steps.popleft() if self.steps else reply("That is all.")


@pytest.mark.timeout(300)  # every example runs real turns; PostgreSQL under load is slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(TURN, min_size=1, max_size=4))
async def test_every_request_is_valid_and_under_the_window(
    validity_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, turns: list[Any]
) -> None:
    client = validity_client
    fake_llm.reset()
    fake_llm.context_window_tokens = WINDOW
    script = Script()
    fake_llm.always(script)
    session_id = await new_session(client)
    for steps, extra in turns:
        if extra == "rest-task":
            await client.post(f"/sessions/{session_id}/tasks", json={"subject": "from REST"})
        elif extra == "compact":
            await client.post(f"/sessions/{session_id}/compact", params={"wait": "true"})
        script.steps = deque(_step(s) for s in steps)
        response = await client.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go on"}
        )
        job = response.json()["job"]
        if job["status"] != "succeeded":
            assert job["error"]["type"] == "urn:strata:problem:context-exhausted", job
            event("a turn ended context-exhausted")

    assert fake_llm.unexpected == []
    for request in fake_llm.requests:
        assert count_tokens(request.body) < 0.99 * WINDOW
    sent = [str(r.body) for r in fake_llm.requests]
    for what, seen in [
        ("a compaction", any(SUMMARY_SYSTEM in text for text in sent)),
        ("a cut tool result", any("[Output truncated" in text for text in sent)),
        ("a paged Detail", any("call Detail with time=" in text for text in sent)),
        ("a reminder", any("<system-reminder>" in text for text in sent)),
    ]:
        event(f"{what}: {'yes' if seen else 'no'}")
    assert_log_consistent(await items(client, session_id))
