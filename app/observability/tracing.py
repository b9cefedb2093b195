"""OpenTelemetry traces of requests, SQL and outbound HTTP (LLM calls, webhook deliveries),
when STRATA_OTEL_ENABLED is set and the `strata[otel]` extra is installed.

Spans go to whatever tracer provider the process already has; without one, to an OTLP/HTTP
exporter configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_SERVICE_NAME, ...). Nothing here is imported unless tracing is asked for.
"""

from __future__ import annotations

import logging
from typing import Any

from app.settings import Settings

logger = logging.getLogger("strata.tracing")
_instrumented = False


def configure_tracing(settings: Settings, app: Any) -> bool:
    """Instruments `app` (and, once per process, SQLAlchemy and httpx); whether it did."""
    global _instrumented
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
        _instrumented = True
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
    return True


def _trace_every_engine(tracer: Any) -> None:
    """A span per SQL statement of every engine, made or to be made (class-level events: the
    engines are built in several places, some on the SQLite writer's thread, whose spans
    then have no parent)."""
    from opentelemetry import trace
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "before_cursor_execute")
    def _start(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"
        span = tracer.start_span(
            verb,
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
