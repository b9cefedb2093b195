"""STRATA_OTEL_ENABLED with the `strata[otel]` extra: a request, its SQL and the server's
outbound HTTP become spans. Run in a child process: instrumentation is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.settings import Settings
from tests.support.apps import serve

ROOT = Path(__file__).resolve().parents[1]

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
