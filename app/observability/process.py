"""Per-process set-up of the metrics, done by the CLI before any metric exists.

With STRATA_METRICS_DIR every process of a machine (the API and its workers) keeps its
counters in files of that folder (prometheus-client's multiprocess mode) and `GET /metrics`
of any of them adds them all up. Each process's files are named after its host name and
pid, so containers sharing the folder (whose pids all start at 1) never write into each
other's files.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys

from app.settings import Settings

_ENV = "PROMETHEUS_MULTIPROC_DIR"


def process_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


METRICS_MODULE = "app.observability.metrics"


def prepare_metrics(settings: Settings) -> None:
    """Sets up the metrics folder; refused once a metric exists. A metric without labels
    keeps the value its definition made: one defined before would count in this process's
    memory only, and never show in a scrape of the folder."""
    if settings.metrics_dir is None:
        return
    if METRICS_MODULE in sys.modules:
        raise RuntimeError(
            f"STRATA_METRICS_DIR is set up after {METRICS_MODULE} defined the metrics: "
            "prepare_metrics must run before anything imports it"
        )
    settings.metrics_dir.mkdir(parents=True, exist_ok=True)
    os.environ[_ENV] = str(settings.metrics_dir.resolve())
    from prometheus_client import multiprocess, values

    values.ValueClass = values.MultiProcessValue(  # type: ignore[no-untyped-call]
        process_identifier=process_identity
    )
    identity = process_identity()
    # a stopped process's open-stream gauge is dropped; its counters stay counted
    atexit.register(multiprocess.mark_process_dead, identity)


def multiprocess_dir() -> str | None:
    return os.environ.get(_ENV)
