"""`Availability`: when an outage is over."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.exc import OperationalError

from app.db.availability import Availability

LOCKED = OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))


def _back_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "available again" in r.getMessage()]


def test_an_outage_is_not_over_until_a_write_succeeds_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="strata.db")
    availability = Availability()
    availability.failed(LOCKED, "write")
    availability.read()
    availability.read()

    assert availability.down
    assert _back_lines(caplog) == []


def test_a_failure_after_a_read_needs_a_new_read_to_end_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="strata.db")
    availability = Availability()
    availability.failed(LOCKED, "write")
    availability.read()
    availability.failed(OperationalError("SELECT 1", {}, Exception("gone")), "read")
    availability.written()
    assert availability.down

    availability.read()
    assert not availability.down
    assert len(_back_lines(caplog)) == 1


def test_the_same_error_reported_twice_counts_once() -> None:
    availability = Availability()
    availability.failed(LOCKED, "write")
    availability.failed(LOCKED, "read")

    assert availability.failures == 1
