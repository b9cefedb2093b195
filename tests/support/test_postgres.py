"""The test run's own PostgreSQL plumbing waits for a slow server instead of guessing how
long one may take: on a loaded machine a server can take longer than one connection
attempt's limit to answer, and the suite must not fail at set-up for it."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import psycopg
import pytest

from tests.support.postgres import CONNECT_ATTEMPT_SECONDS, EmbeddedPostgres, not_ready

pytestmark = pytest.mark.postgresql_only


@pytest.fixture
def server() -> Iterator[EmbeddedPostgres]:
    started = EmbeddedPostgres()
    started.start()
    try:
        yield started
    finally:
        started.stop()


def test_a_database_is_made_on_a_server_that_answers_later_than_one_connect_attempt(
    server: EmbeddedPostgres,
) -> None:
    assert server.process is not None
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)  # the postmaster takes no connection while stopped
    resume = threading.Timer(CONNECT_ATTEMPT_SECONDS + 2, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        url = server.create_database("made_while_slow")
    finally:
        resume.join()
    with psycopg.connect(url.replace("+psycopg", ""), connect_timeout=30) as connection:
        assert connection.execute("SELECT current_database()").fetchone() == ("made_while_slow",)


def test_a_server_that_has_exited_fails_the_connection_at_once(
    server: EmbeddedPostgres,
) -> None:
    assert server.process is not None
    server.process.kill()
    server.process.wait()
    with pytest.raises(RuntimeError, match="postgres exited"):
        server.connect()


def test_a_connection_refused_for_good_is_not_waited_for(server: EmbeddedPostgres) -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        server.connect("no_such_database")
    assert not not_ready(refused.value)
