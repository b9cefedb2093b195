"""Strata's Prometheus metrics, all named `strata_*`.

Two kinds: what a process counts as it works (LLM calls, steps, webhook deliveries, open
streams: in-memory counters, no database work), and what the database knows (jobs by kind
and status, the queue), read once per scrape by `JobsCollector`, so those are right however
many workers there are. With STRATA_METRICS_DIR the counted ones are added up over every
process of the machine (`app.observability.process`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

from app.observability.process import multiprocess_dir

LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60)

LLM_REQUESTS = Counter(
    "strata_llm_requests", "LLM requests sent, by model and outcome (ok or error)",
    ["model", "outcome"],
)  # fmt: skip
LLM_LATENCY = Histogram(
    "strata_llm_request_duration_seconds", "Time of one LLM request, streaming included",
    ["model"], buckets=LATENCY_BUCKETS,
)  # fmt: skip
LLM_TOKENS = Counter(
    "strata_llm_tokens", "Tokens of LLM requests, by model and type "
    "(input, output, cache_read, cache_creation)", ["model", "type"],
)  # fmt: skip
LLM_ERRORS = Counter(
    "strata_llm_errors", "Failed LLM requests, by model and problem type", ["model", "error"]
)
STEP_GAP = Histogram(
    "strata_step_gap_seconds",
    "Time from an LLM answer to the same job's next request: Strata's own work per agent "
    "step (the step overhead) plus the run time of that step's tools",
    buckets=STEP_BUCKETS,
)
WEBHOOK_ATTEMPTS = Counter(
    "strata_webhook_attempts", "Webhook delivery attempts, by outcome (delivered: a 2xx "
    "answer; failed: any other answer, an error or a refused target)", ["outcome"],
)  # fmt: skip
OPEN_STREAMS = Gauge(
    "strata_open_streams", "Server-Sent Event streams open now, by kind (session, job)",
    ["kind"], multiprocess_mode="livesum",
)  # fmt: skip


@dataclass(frozen=True)
class JobCounts:
    """What the database says at scrape time."""

    by_kind_and_status: dict[tuple[str, str], int]
    queued: int
    oldest_queued_age_seconds: float


class JobsCollector(Collector):
    """Metrics read from the database; `counts` is filled in just before each scrape."""

    def __init__(self) -> None:
        self.counts: JobCounts | None = None

    def collect(self) -> Iterable[Metric]:
        counts = self.counts
        if counts is None:
            return []
        jobs = GaugeMetricFamily(
            "strata_jobs", "Jobs in the database, by kind and status", labels=["kind", "status"]
        )
        for (kind, status), count in sorted(counts.by_kind_and_status.items()):
            jobs.add_metric([kind, status], count)
        depth = GaugeMetricFamily("strata_queue_depth", "Jobs queued, waiting for a runner")
        depth.add_metric([], counts.queued)
        oldest = GaugeMetricFamily(
            "strata_queue_oldest_age_seconds", "How long the oldest queued job has waited"
        )
        oldest.add_metric([], counts.oldest_queued_age_seconds)
        return [jobs, depth, oldest]


def exposition(counts: JobCounts) -> tuple[bytes, str]:
    """The scrape's body and content type: this machine's counters (every process's with
    STRATA_METRICS_DIR, else this one's) and the database's numbers."""
    registry = CollectorRegistry()
    directory = multiprocess_dir()
    if directory is not None:
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Forward(REGISTRY))
    database = JobsCollector()
    database.counts = counts
    registry.register(database)
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Forward(Collector):
    """Strata's own metrics of the process's default registry (the counters above): the
    client library's process and GC metrics there are left out, so that every name a scrape
    shows starts with `strata_`, with STRATA_METRICS_DIR or without."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            if metric.name.startswith("strata_"):
                yield metric
