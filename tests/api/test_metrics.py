"""GET /metrics in one process (no STRATA_METRICS_DIR): only Strata's own names."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.apps import serve


async def test_a_single_process_scrape_shows_only_strata_names(make_settings: Any) -> None:
    """The client library's `process_*` and `python_*` metrics sat beside Strata's, though
    the README promises every name starts with `strata_`."""
    async with serve(make_settings()) as (_, client):
        scraped = await client.get("/metrics")

    assert scraped.status_code == 200
    names = [family.name for family in text_string_to_metric_families(scraped.text)]
    assert "strata_jobs" in names and "strata_queue_depth" in names
    assert [name for name in names if not name.startswith("strata_")] == []
