"""What an operator reads, with the API in one process and two workers in two others:
`GET /metrics` counts every process's LLM requests (STRATA_METRICS_DIR) and the database's
jobs, and with STRATA_LOG_FORMAT=json every line of every process is one JSON object carrying
the request, session and job ids."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import REPO_ROOT, StrataProcess, StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, Step, error, reply, text, tool_use
from tests.support.chat import new_session, wait_until
from tests.support.webhooks import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TURNS = 4


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def _total(samples: dict[Any, float], name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, sample_labels), value in samples.items()
        if sample == name and labels.items() <= dict(sample_labels).items()
    )


def _started(worker: StrataProcess) -> Any:
    async def started() -> bool:
        messages = [json.loads(line)["message"] for line in worker.output().splitlines()]
        return any(m.startswith("runner ") and m.endswith(" started") for m in messages)

    return started


def _answer(body: dict[str, Any]) -> Step:
    return reply(text("hello"), usage={"input_tokens": 11, "output_tokens": 3}, delay=0.3)


async def test_metrics_and_json_logs_of_an_api_and_two_workers(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_llm.always(_answer)
    shared = {
        "STRATA_METRICS_DIR": str(tmp_path / "metrics"),
        "STRATA_LOG_FORMAT": "json",
        "STRATA_WORKER_CONCURRENCY": "1",
    }
    workers = [strata_procs.worker(name, **shared) for name in ("a", "b")]
    api = strata_procs.serve(run_worker_in_server=False, **shared)
    for worker in workers:  # both runners poll the queue before the turns are sent
        await wait_until(_started(worker), seconds=60)

    async with api.client(timeout=60.0) as client:
        sessions = [await new_session(client) for _ in range(TURNS)]
        answers = await asyncio.gather(
            *(
                client.post(f"/sessions/{s}/messages", params={"wait": "true"}, json={"text": "hi"})
                for s in sessions
            )
        )
        scraped = await client.get("/metrics")
        job_ids = [a.json()["job"]["id"] for a in answers]

    assert [a.status_code for a in answers] == [200] * TURNS
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    samples = _samples(scraped.text)
    model = fake_llm.requests[0].model or ""
    assert _total(samples, "strata_llm_requests_total") == len(fake_llm.requests)
    assert _total(samples, "strata_llm_requests_total", model=model, outcome="ok") >= TURNS
    assert _total(samples, "strata_llm_tokens_total", model=model, type="input") >= 11 * TURNS
    assert _total(samples, "strata_llm_request_duration_seconds_count") == len(fake_llm.requests)
    assert _total(samples, "strata_jobs", kind="chat", status="succeeded") == TURNS
    assert _total(samples, "strata_queue_depth") >= 0
    assert all(name.startswith("strata_") for name, _ in samples)

    lines_by_process = {p.name: p.output().splitlines() for p in strata_procs.started}
    for name, lines in lines_by_process.items():
        assert lines, f"{name} logged nothing"
        for line in lines:
            record = json.loads(line)  # every line of every process is one JSON object
            assert {"time", "level", "logger", "message"} <= record.keys(), line
            assert {"request_id", "session_id", "job_id"} <= record.keys(), line
    ran_by = {
        record["job_id"]: worker.name
        for worker in workers
        for record in map(json.loads, worker.output().splitlines())
        if record["job_id"] in job_ids and "claimed" in record["message"]
    }
    assert set(ran_by) == set(job_ids)
    assert len(set(ran_by.values())) == 2, "one worker ran every turn"
    api_records = [json.loads(line) for line in lines_by_process[api.name]]
    assert any(r["request_id"] and r["logger"].startswith("uvicorn") for r in api_records)


METRICS_TABLE = re.compile(r"^\| (`strata_[^|]*) \|", re.MULTILINE)


def documented_metrics() -> list[str]:
    """Every metric name the operations page's metrics table lists (labels left off)."""
    readme = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    names = [
        name.split("{", 1)[0]
        for cell in METRICS_TABLE.findall(readme)
        for name in re.findall(r"`([^`]+)`", cell)
    ]
    assert len(names) >= 10, names
    return names


def _shown(samples: dict[Any, float], name: str) -> bool:
    suffixes = ("", "_bucket", "_count", "_sum")
    return any(sample in {name + suffix for suffix in suffixes} for sample, _ in samples)


def _by_last_message(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]["content"]
    if any(block.get("type") == "tool_result" for block in last):
        return reply(text("it is late"))
    said = " ".join(block.get("text", "") for block in last)
    if "fail" in said:
        return error(400)
    if "time" in said:
        return reply(tool_use("current_time", {}))
    return reply(text("hello"))


async def test_every_documented_metric_is_on_metrics_of_a_served_process_with_metrics_dir(
    strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> None:
    """`strata serve` imports the app as its command line does; a metric defined at import
    (the step gap) is in every scrape, since the metrics folder is set up before."""
    fake_llm.always(_by_last_message)
    api = strata_procs.serve(
        STRATA_METRICS_DIR=str(tmp_path / "metrics"),
        STRATA_WEBHOOK_ALLOW_PRIVATE="true",
        STRATA_WEBHOOK_POLL_SECONDS="0.05",
    )
    with Receiver() as receiver:
        async with api.client(timeout=60.0) as client:
            session = await new_session(client)
            turns = [
                await client.post(
                    f"/sessions/{session}/messages", params={"wait": "true"}, json={"text": said}
                )
                for said in ("what time is it?", "fail now")
            ]
            hook = await client.post(
                "/webhooks", json={"url": receiver.url, "events": ["job.succeeded"]}
            )
            assert hook.status_code == 201, hook.text
            assert (await client.post(f"/webhooks/{hook.json()['id']}/test")).status_code == 202
            await receiver.wait_for(1, seconds=30)
            job = turns[0].json()["job"]["id"]
            assert (await client.get(f"/jobs/{job}/events")).status_code == 200

            async def attempt_counted() -> bool:
                scrape = await client.get("/metrics")
                return _shown(_samples(scrape.text), "strata_webhook_attempts_total")

            await wait_until(attempt_counted, seconds=30)
            scraped = await client.get("/metrics")

    assert [t.status_code for t in turns] == [200, 502], [
        t.text for t in turns
    ]  # 502: the LLM failed
    samples = _samples(scraped.text)
    assert [name for name in documented_metrics() if not _shown(samples, name)] == []
