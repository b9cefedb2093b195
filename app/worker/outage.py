"""How a background loop lives through a database outage: back off, go on, log what is its own."""

from __future__ import annotations

import logging

from app.db.engine import is_transient


class Outage:
    """One loop's view of the database being away.

    A transient failure (`is_transient`) is the database's outage, which its
    `Availability` logs once for the whole process; the loop notes its own at the debug
    level. The first failure that does not look transient is logged with its traceback,
    later ones of the same run of failures at debug level, and the first success after
    it says it is over. `backoff` grows while failures go on."""

    def __init__(self, logger: logging.Logger, who: str, max_seconds: float) -> None:
        self.logger = logger
        self.who = who
        self.max_seconds = max_seconds
        self.failures = 0
        self._logged = False

    def failed(self, exc: BaseException, what: str) -> None:
        self.failures += 1
        if self._logged or is_transient(exc):
            self.logger.debug("%s: %s: %s", self.who, what, exc)
        else:
            self._logged = True
            self.logger.error("%s: %s", self.who, what, exc_info=exc)

    def recovered(self) -> None:
        if self._logged:
            self.logger.info("%s: going again after %s failures", self.who, self.failures)
        elif self.failures:
            self.logger.debug("%s: going again after %s failures", self.who, self.failures)
        self.failures = 0
        self._logged = False

    def backoff(self, base: float) -> float:
        """The wait before the next try: `base` while all is well, then doubling."""
        if not self.failures:
            return base
        return min(self.max_seconds, base * 2.0 ** min(self.failures, 10))
