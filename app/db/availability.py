"""Whether this process can reach its database: an outage is logged once, and its end once.

Every unit of work the `Database` runs reports here: a read or a write that met a
transient error (`is_transient`: a lock held elsewhere, a restarting server) starts an
outage, or counts into the one going on; a read and a write that both succeeded after
the last such failure end it. So a 20-second outage that met a hundred requests, the
runner and the dispatcher is one WARNING line when it starts and one INFO line when
it is over, whoever met it; the failures in between go to the debug level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger("strata.db")


class Availability:
    """The database's availability as this process's units of work met it.

    Used from the event loop only (the writer thread's outcomes reach it there)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.down_since: float | None = None
        self.failures = 0
        self._read_since_failure = False
        self._written_since_failure = False
        self._last: BaseException | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException, what: str) -> None:
        """A unit of work (`what`: "read", "write") met the transient `exc`. The same
        error reported again (a write's, raised on through the request's read) counts once."""
        if exc is self._last:
            return
        self._last = exc
        self.failures += 1
        self._read_since_failure = self._written_since_failure = False
        if self.down_since is None:
            self.down_since = self._clock()
            logger.warning("database unavailable (a %s failed: %s)", what, _summary(exc))
        else:
            logger.debug("database still unavailable (a %s failed: %s)", what, _summary(exc))

    def read(self) -> None:
        """A read unit of work succeeded."""
        if self.down_since is not None:
            self._read_since_failure = True
            self._back_if_both()

    def written(self) -> None:
        """A write unit of work committed."""
        if self.down_since is not None:
            self._written_since_failure = True
            self._back_if_both()

    def _back_if_both(self) -> None:
        if not (self._read_since_failure and self._written_since_failure):
            return
        assert self.down_since is not None
        seconds = self._clock() - self.down_since
        logger.info(
            "database available again: reads and writes succeed "
            "(unavailable for %.1f s, %s failed units of work)",
            seconds,
            self.failures,
        )
        self.down_since = None
        self.failures = 0
        self._last = None


def _summary(exc: BaseException) -> str:
    """The error's class and first line: a driver's message may run over several lines
    (the SQL statement, a link to SQLAlchemy's docs)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
