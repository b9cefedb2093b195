"""The metrics folder is set up before any metric exists, or not at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import app.observability.metrics
from app.observability.process import prepare_metrics
from app.settings import Settings
try:
    prepare_metrics(Settings(_env_file=None, metrics_dir=sys.argv[1]))
except RuntimeError as exc:
    print(exc)
"""


def test_the_metrics_folder_is_refused_once_a_metric_was_defined(tmp_path: Path) -> None:
    """A metric without labels defined before the folder counts in memory only: the step
    gap would be missing from every scrape of a served process."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "metrics")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert "prepare_metrics must run before" in result.stdout
