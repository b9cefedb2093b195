"""GET /metrics in one process (no STRATA_METRICS_DIR): only Strata's own names, and the
counters and gauges move with what they count (deltas: the registry is the process's)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.repositories.jobs import JobRepository
from app.domain.jobs import JobStatus
from app.services.jobs import set_status
from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job


async def test_a_single_process_scrape_shows_only_strata_names(make_settings: Any) -> None:
    """The client library's `process_*` and `python_*` metrics sat beside Strata's, though
    the README promises every name starts with `strata_`."""
    async with serve(make_settings()) as (_, client):
        scraped = await client.get("/metrics")

    assert scraped.status_code == 200
    names = [family.name for family in text_string_to_metric_families(scraped.text)]
    assert "strata_jobs" in names and "strata_queue_depth" in names
    assert [name for name in names if not name.startswith("strata_")] == []


async def _sample(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    """The sum of a scrape's samples of `name` with these labels (0 when there is none)."""
    total = 0.0
    for family in text_string_to_metric_families((await client.get("/metrics")).text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += float(sample.value)
    return total


async def _turn(client: httpx.AsyncClient, session_id: str) -> httpx.Response:
    return await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
    )


async def test_an_answered_request_counts_its_tokens_and_its_duration(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    before = await _sample(agent_client, "strata_llm_tokens_total", type="output")
    timed = await _sample(agent_client, "strata_llm_request_duration_seconds_count")
    fake_llm.reply(text("hello"), usage={"input_tokens": 120, "output_tokens": 7})

    assert (await _turn(agent_client, session_id)).status_code == 200

    assert await _sample(agent_client, "strata_llm_tokens_total", type="output") == before + 7
    after = await _sample(agent_client, "strata_llm_request_duration_seconds_count")
    assert after == timed + 1


async def test_a_failed_request_is_counted_by_its_problem_type(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await new_session(agent_client)
    failed = {"error": "llm-request-rejected"}
    before = await _sample(agent_client, "strata_llm_errors_total", **failed)
    fake_llm.error(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "bad"}})  # fmt: skip

    assert (await _turn(agent_client, session_id)).status_code == 502

    assert await _sample(agent_client, "strata_llm_errors_total", **failed) == before + 1


async def test_an_open_event_stream_is_counted_until_it_ends(make_settings: Any) -> None:
    async with serve(make_settings(run_worker_in_server=False)) as (app, client):
        job = await submit_job(client)
        before = await _sample(client, "strata_open_streams", kind="job")
        stream = asyncio.create_task(client.get(f"/jobs/{job['id']}/events"))
        for _ in range(200):
            if await _sample(client, "strata_open_streams", kind="job") == before + 1:
                break
            await asyncio.sleep(0.02)
        assert await _sample(client, "strata_open_streams", kind="job") == before + 1

        async def end(db: AsyncSession) -> None:
            row = await JobRepository(db).get(job["id"])
            assert row is not None
            await set_status(db, row, JobStatus.cancelled)

        await app.state.database.write(end)
        assert (await asyncio.wait_for(stream, 10)).status_code == 200
        assert await _sample(client, "strata_open_streams", kind="job") == before
