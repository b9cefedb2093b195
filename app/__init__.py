"""Strata: an HTTP API server that hosts long-running LLM agent work and keeps it on track."""

__version__ = "0.1.0"
