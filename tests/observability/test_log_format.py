"""STRATA_LOG_FORMAT: JSON lines carry the request, session and job ids of their context."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from app.observability import context
from app.observability.logs import configure_logging
from app.settings import Settings


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield io.StringIO()
    root.handlers[:], root.level = saved
    logging.captureWarnings(False)


def _configure(fmt: str, output: io.StringIO) -> None:
    configure_logging(Settings(_env_file=None, log_format=fmt))
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(output)


def test_json_lines_carry_the_ids_of_their_context(log_output: io.StringIO) -> None:
    _configure("json", log_output)
    log = logging.getLogger("strata.test")

    log.info("outside")
    with context.bound(request="req1", session="ses_1"), context.bound(job="job_1"):
        log.warning("inside %s", "a job")

    outside, inside = map(json.loads, log_output.getvalue().splitlines())
    assert (outside["request_id"], outside["session_id"], outside["job_id"]) == (None,) * 3
    assert inside["message"] == "inside a job"
    assert inside["level"] == "warning"
    assert inside["logger"] == "strata.test"
    assert (inside["request_id"], inside["session_id"], inside["job_id"]) == (
        "req1",
        "ses_1",
        "job_1",
    )


def test_an_exception_stays_inside_its_json_line(log_output: io.StringIO) -> None:
    _configure("json", log_output)

    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        logging.getLogger("strata.test").exception("failed")

    (line,) = log_output.getvalue().splitlines()
    assert "ValueError: boom" in json.loads(line)["exception"]


def test_text_lines_name_the_ids_they_have(log_output: io.StringIO) -> None:
    _configure("text", log_output)

    with context.bound(job="job_9"):
        logging.getLogger("strata.test").info("step")

    assert "strata.test [job=job_9]: step" in log_output.getvalue()
