"""OpenTelemetry traces of requests, jobs, SQL and outbound HTTP, when STRATA_OTEL_ENABLED is
set and the `strata[otel]` extra is installed.

A request is a trace (FastAPI's instrumentation), and so is each run of a job: its span
(`job <kind>`) is the parent of its LLM calls (`llm <model>`), its tool calls
(`tool <name>`) and every SQL statement it runs, the ones run for it on the SQLite
writer's thread included (a write unit carries its caller's trace context there,
`current_context` / `attached`). SQL is traced both where it goes through SQLAlchemy
(cursor events) and where a prepared statement runs on the driver connection
(`sql_span`). Webhook deliveries are httpx requests (its instrumentation).

Spans go to whatever tracer provider the process already has; without one, to an OTLP/HTTP
exporter configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_SERVICE_NAME, ...). Nothing here is imported unless tracing is asked for, and with
tracing off each helper is one check of a module global.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from app.settings import Settings

logger = logging.getLogger("strata.tracing")
_instrumented = False
_tracer: Any = None  # the process's tracer once tracing is configured
_NOTHING: AbstractContextManager[None] = nullcontext()


def span(name: str, attributes: dict[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A span around a block, current within it (a no-op without tracing)."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(name, attributes=attributes)  # type: ignore[no-any-return]


def sql_span(dialect: str, statement: str) -> AbstractContextManager[Any]:
    """A span around one statement run outside SQLAlchemy's execution (a prepared one)."""
    if _tracer is None:
        return _NOTHING
    from opentelemetry import trace

    return _tracer.start_as_current_span(  # type: ignore[no-any-return]
        _verb(statement),
        kind=trace.SpanKind.CLIENT,
        attributes={"db.system": dialect, "db.statement": statement[:2000]},
    )


def current_context() -> Any:
    """The caller's trace context, to run its work elsewhere (None without tracing)."""
    if _tracer is None:
        return None
    from opentelemetry import context

    return context.get_current()


@contextmanager
def _attached_context(trace_context: Any) -> Iterator[None]:
    from opentelemetry import context

    token = context.attach(trace_context)
    try:
        yield
    finally:
        context.detach(token)


def attached(trace_context: Any) -> AbstractContextManager[None]:
    """Within the block, spans belong to `trace_context` (from `current_context`)."""
    if trace_context is None:
        return _NOTHING
    return _attached_context(trace_context)


def _verb(statement: str) -> str:
    return statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"


def configure_tracing(settings: Settings, app: Any) -> bool:
    """Instruments `app` (and, once per process, SQLAlchemy and httpx); whether it did."""
    global _instrumented, _tracer
    if not settings.otel_enabled:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    except ImportError:
        logger.error(
            "STRATA_OTEL_ENABLED is set but OpenTelemetry is not installed: "
            "pip install 'strata[otel]'; serving without traces"
        )
        return False
    if not _instrumented:
        if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
            trace.set_tracer_provider(_otlp_provider())
        _trace_every_engine(trace.get_tracer("strata.sql"))
        HTTPXClientInstrumentor().instrument()
        _tracer = trace.get_tracer("strata")
        _instrumented = True
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
    return True


def _trace_every_engine(tracer: Any) -> None:
    """A span per SQL statement of every engine, made or to be made (class-level events: the
    engines are built in several places, some on the SQLite writer's thread, where each
    unit runs in its caller's trace context)."""
    from opentelemetry import trace
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "before_cursor_execute")
    def _start(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        span = tracer.start_span(
            _verb(statement),
            kind=trace.SpanKind.CLIENT,
            attributes={"db.system": conn.dialect.name, "db.statement": statement[:2000]},
        )
        conn.info.setdefault("strata_spans", []).append(span)

    @event.listens_for(Engine, "after_cursor_execute")
    def _end(conn: Any, *_: Any) -> None:
        spans = conn.info.get("strata_spans")
        if spans:
            spans.pop().end()

    @event.listens_for(Engine, "handle_error")
    def _failed(context: Any) -> None:
        spans = context.connection.info.get("strata_spans") if context.connection else None
        if spans:
            span = spans.pop()
            span.record_exception(context.original_exception)
            span.set_status(trace.Status(trace.StatusCode.ERROR))
            span.end()


def _otlp_provider() -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "strata"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
