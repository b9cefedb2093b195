"""STRATA_OTEL_ENABLED with the `strata[otel]` extra: a request, its SQL and the server's
outbound HTTP become spans. Run in a child process: instrumentation is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import serve

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import IN_PROCESS_HOSTS, serve

async def main():
    settings = Settings(_env_file=None, database_url=sys.argv[1], otel_enabled=True,
                        run_worker_in_server=False, allowed_hosts=IN_PROCESS_HOSTS)
    async with serve(settings) as (_, client):
        created = await client.post("/sessions", json={"title": "traced"})
        assert created.status_code == 201, created.text
    print(json.dumps([span.name for span in exporter.get_finished_spans()]))

asyncio.run(main())
"""


def test_requests_and_their_sql_become_spans(database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, database_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    names = json.loads(result.stdout.strip().splitlines()[-1])
    assert "POST /sessions" in names
    assert any(name.split()[0] in {"INSERT", "SELECT", "BEGIN"} for name in names), names


async def test_tracing_is_off_by_default(make_settings: Any) -> None:
    assert Settings(_env_file=None).otel_enabled is False
    async with serve(make_settings()) as (app, _):
        assert not getattr(app, "_is_instrumented_by_opentelemetry", False)


JOB_SCRIPT = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.apps import IN_PROCESS_HOSTS, serve

async def main():
    settings = Settings(_env_file=None, database_url=sys.argv[1], otel_enabled=True,
                        anthropic_base_url=sys.argv[2], llm_max_retries=0,
                        allowed_hosts=IN_PROCESS_HOSTS)
    async with serve(settings) as (_, client):
        created = await client.post("/sessions", json={"title": "traced"})
        turn = await client.post(f"/sessions/{created.json()['id']}/messages",
                                 params={"wait": "true"}, json={"text": "what time is it?"})
        assert turn.status_code == 200, turn.text
    spans = [
        {"name": s.name, "trace": s.context.trace_id, "id": s.context.span_id,
         "parent": s.parent.span_id if s.parent else None}
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps(spans))

asyncio.run(main())
"""


def test_a_job_is_one_trace_parenting_its_llm_calls_tools_and_writes(
    database_url: str, fake_llm: FakeMessagesAPI
) -> None:
    """A job is a trace of its own: its LLM calls have spans (httpx2 under the SDK is never
    instrumented), and the SQL the writer thread runs for the job has the job's parent."""
    fake_llm.reply(tool_use("current_time", {}))
    fake_llm.reply("It is late.")

    result = subprocess.run(
        [sys.executable, "-c", JOB_SCRIPT, database_url, fake_llm.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    spans = json.loads(result.stdout.strip().splitlines()[-1])
    [job] = [s for s in spans if s["name"] == "job chat"]
    assert job["parent"] is None  # a trace of its own, not the request's
    parents = {s["id"]: s["parent"] for s in spans}

    def under_job(span: dict[str, Any]) -> bool:
        parent = span["parent"]
        while parent is not None and parent != job["id"]:
            parent = parents.get(parent)
        return bool(parent == job["id"] and span["trace"] == job["trace"])

    llm_calls = [s for s in spans if s["name"].startswith("llm ")]
    tools = [s for s in spans if s["name"] == "tool current_time"]
    writes = [s for s in spans if s["name"] in {"INSERT", "UPDATE"} and under_job(s)]
    assert len(llm_calls) == 2 and all(map(under_job, llm_calls)), llm_calls
    assert len(tools) == 1 and under_job(tools[0])
    assert writes, "no write of the job's is in its trace"
