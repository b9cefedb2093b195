"""Per-tenant caps on work in flight in this process.

A tenant that fires many heavy requests at once (hook imports, chat messages, jobs)
would otherwise take the writer and the runner from everyone else. Each request of
a capped kind holds a slot of its tenant while it runs; past the cap it is refused
at once with 429 and a `Retry-After`, and nothing it asked for is done. The count
lives in this process only: N server processes admit up to N times the cap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.domain.errors import TooManyRequests


class TenantGate:
    """Counts each tenant's requests in flight through the endpoints it guards."""

    def __init__(self, limit: int, *, retry_after_seconds: int, setting: str) -> None:
        """`limit` 0 or less: no cap. `setting` names the knob in the refusal."""
        self.limit = limit
        self.retry_after_seconds = retry_after_seconds
        self._setting = setting
        self._in_flight: dict[str, int] = {}

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)

    @contextmanager
    def slot(self, tenant: str) -> Iterator[None]:
        """Hold one of `tenant`'s slots for the block, however it ends; refuse when
        the tenant already holds `limit` of them. Used on the event loop only."""
        held = self.in_flight(tenant)
        if 0 < self.limit <= held:
            raise TooManyRequests(
                f"tenant {tenant!r} has {held} such requests in flight, the most allowed "
                f"({self._setting}); retry after {self.retry_after_seconds} s",
                retry_after=self.retry_after_seconds,
            )
        self._in_flight[tenant] = held + 1
        try:
            yield
        finally:
            left = self._in_flight[tenant] - 1
            if left:
                self._in_flight[tenant] = left
            else:
                del self._in_flight[tenant]
