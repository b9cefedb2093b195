"""How a background loop lives through a database outage: log once, back off, go on."""

from __future__ import annotations

import logging

from app.db.engine import is_transient


class Outage:
    """One loop's view of the database being away.

    The first failure is logged with its cause (a traceback if it does not look
    transient), later ones of the same outage only at debug level; the first success
    after it says it is over. `backoff` grows while failures go on."""

    def __init__(self, logger: logging.Logger, who: str, max_seconds: float) -> None:
        self.logger = logger
        self.who = who
        self.max_seconds = max_seconds
        self.failures = 0

    def failed(self, exc: BaseException, what: str) -> None:
        self.failures += 1
        if self.failures > 1:
            self.logger.debug("%s: %s again: %s", self.who, what, exc)
        elif is_transient(exc):
            self.logger.warning("%s: %s (database unavailable: %s)", self.who, what, exc)
        else:
            self.logger.error("%s: %s", self.who, what, exc_info=exc)

    def recovered(self) -> None:
        if self.failures:
            self.logger.warning("%s: database back after %s failures", self.who, self.failures)
        self.failures = 0

    def backoff(self, base: float) -> float:
        """The wait before the next try: `base` while all is well, then doubling."""
        if not self.failures:
            return base
        return min(self.max_seconds, base * 2.0 ** min(self.failures, 10))
