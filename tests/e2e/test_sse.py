"""SSE against a live `strata serve` (its in-server runner answers the turn)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import StrataProcesses, StrataServer
from tests.e2e.sse import SSEComment, SSEvent, read_sse
from tests.fakes.messages_api import FakeMessagesAPI, count_tokens
from tests.support.chat import assert_log_consistent, items, new_session, wait_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

REPLY = "The quick brown fox jumps over the lazy dog."
EVENT_ID = re.compile(r"^\d+(\.\d+)?$")


async def _collect(
    client: httpx.AsyncClient,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    until: Callable[[SSEvent], bool] | None = None,
    on_open: Callable[[], Any] | None = None,
    within: float = 15.0,
) -> list[SSEvent]:
    """Read a stream's events until `until` holds (or the server ends the stream).

    `on_open` is awaited once the server's stream loop is running, which the first
    keep-alive comment proves (keep-alives come every 0.2 s here), so no live signal
    sent after it can be missed."""
    events: list[SSEvent] = []
    async with asyncio.timeout(within):
        async with client.stream("GET", path, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for message in read_sse(response):
                if isinstance(message, SSEComment):
                    if on_open is not None:
                        opened, on_open = on_open, None
                        await opened()
                    continue
                events.append(message)
                if until is not None and until(message):
                    break
    return events


def _job_ended(job_id: str) -> Callable[[SSEvent], bool]:
    def ended(event: SSEvent) -> bool:
        return (
            event.event == "job.status"
            and event.data["job_id"] == job_id
            and event.data["status"] in {"succeeded", "failed", "cancelled"}
        )

    return ended


async def _chat_over_sse(
    server: StrataServer, client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> tuple[str, str, list[SSEvent]]:
    fake_llm.reply(REPLY, delay_between_chunks=0.05)
    session_id = await new_session(client)
    job_ids: list[str] = []

    async def send() -> None:
        response = await client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})
        assert response.status_code == 202, response.text
        job_ids.append(response.json()["job_id"])

    def ended(event: SSEvent) -> bool:
        return bool(job_ids) and _job_ended(job_ids[0])(event)

    events = await _collect(client, f"/sessions/{session_id}/events", until=ended, on_open=send)
    assert job_ids, "the stream never opened"
    return session_id, job_ids[0], events


async def test_a_turn_streams_deltas_items_usage_and_status(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    async with server.client() as client:
        session_id, job_id, events = await _chat_over_sse(server, client, fake_llm)
        job = await wait_job(client, job_id, seconds=5)
        log = await items(client, session_id)

    assert job["status"] == "succeeded"
    assert job["result_text"] == REPLY
    assert all(e.id is not None and EVENT_ID.match(e.id) for e in events), events
    durable_ids = [e.int_id for e in events if e.durable]
    assert durable_ids == sorted(set(durable_ids))

    deltas = [e for e in events if e.event == "text.delta"]
    assert len(deltas) >= 2
    assert "".join(e.data["text"] for e in deltas) == REPLY
    assert all(not e.durable for e in deltas)  # live signals: `<last durable id>.<n>`
    assert all(e.data["job_id"] == job_id for e in deltas)
    assert all(e.data["index"] == 0 for e in deltas)  # the answer's first content block
    assert all(e.data["type"] == e.event and e.data["session_id"] == session_id for e in events)

    appended = [e for e in events if e.event == "item.appended"]
    assert [e.data["item"]["kind"] for e in appended] == ["user_message", "assistant_message"]
    for event in appended:
        assert event.data["item"]["seq"] == event.data["seq"]
        assert event.data["item"]["kind"] == event.data["kind"]
    assert appended[1].data["item"]["content"] == [{"type": "text", "text": REPLY}]

    usage = [e for e in events if e.event == "usage"]
    assert len(usage) == 1
    assert usage[0].data["input_tokens"] == count_tokens(fake_llm.requests[0].body)
    assert usage[0].data["output_tokens"] > 0

    statuses = [e.data["status"] for e in events if e.event == "job.status"]
    assert statuses == ["queued", "running", "succeeded"]

    # The deltas arrive before the assistant item that they add up to.
    assert events.index(deltas[-1]) < events.index(appended[1])

    # A client that only polls the log sees exactly the items the stream announced.
    assert log == [e.data["item"] for e in appended]
    assert_log_consistent(log)


async def test_last_event_id_resumes_a_job_stream_after_that_event(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    async with server.client() as client:
        _, job_id, events = await _chat_over_sse(server, client, fake_llm)
        durable = [e for e in events if e.durable and e.data.get("job_id", job_id) == job_id]
        first = durable[0]  # the user item, appended when the message is accepted

        # The job has ended, so the job stream replays what came after and closes.
        replay = await _collect(
            client, f"/jobs/{job_id}/events", headers={"Last-Event-ID": first.id or ""}
        )
        assert replay, "nothing replayed"
        assert all(e.durable and e.int_id > first.int_id for e in replay)
        assert [(e.id, e.event) for e in replay] == [(e.id, e.event) for e in durable[1:]]
        assert replay[-1].event == "job.status"
        assert replay[-1].data["status"] == "succeeded"

        # A live id (`N.k`) resumes after its durable part N: the deltas are not replayed,
        # the assistant item they led to is.
        delta = next(e for e in events if e.event == "text.delta")
        replay = await _collect(
            client, f"/jobs/{job_id}/events", headers={"Last-Event-ID": delta.id or ""}
        )
        assert [e.event for e in replay if e.event == "text.delta"] == []
        assert all(e.int_id > delta.int_id for e in replay)
        assert [(e.id, e.event) for e in replay] == [
            (e.id, e.event) for e in durable if e.int_id > delta.int_id
        ]
        assert any(e.event == "item.appended" for e in replay)


async def test_a_stream_on_the_api_process_sees_what_a_separate_worker_does(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    """Events cross processes through the log: no in-process bus is needed for them."""
    strata_procs.worker("a")
    server = strata_procs.serve(run_worker_in_server=False)
    async with server.client() as client:
        session_id, _job_id, events = await _chat_over_sse(server, client, fake_llm)
        log = await items(client, session_id)

    appended = [e for e in events if e.event == "item.appended"]
    assert [e.data["item"]["kind"] for e in appended] == ["user_message", "assistant_message"]
    statuses = [e.data["status"] for e in events if e.event == "job.status"]
    assert statuses == ["queued", "running", "succeeded"]
    assert log == [e.data["item"] for e in appended]


@pytest.mark.postgresql_only
async def test_live_deltas_of_a_separate_worker_reach_the_api_processs_stream(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    """PostgreSQL LISTEN/NOTIFY carries the worker's text deltas to the API process."""
    strata_procs.worker("a")
    server = strata_procs.serve(run_worker_in_server=False)
    async with server.client() as client:
        _session_id, job_id, events = await _chat_over_sse(server, client, fake_llm)

    deltas = [e for e in events if e.event == "text.delta"]
    assert "".join(e.data["text"] for e in deltas) == REPLY
    assert all(e.data["job_id"] == job_id and not e.durable for e in deltas)
    assert_after = [e.event for e in events]
    assert assert_after.index("text.delta") < len(assert_after) - 1
