"""Admission of a tenant's new work, and the bytes of hook bodies held at once.

A tenant is admitted by what it has queued and running, not by how many of its
requests are in flight: a message sent without `wait` is done in a moment and its
turn waits in the queue, and a `wait=true` request costs nothing while it waits. A
new job (a chat message, a piece job, a draft started) or a transcript import is
refused with 429 and a `Retry-After` once the tenant's queued and running jobs, plus
the imports it has running in this process, reach `STRATA_TENANT_MAX_ACTIVE_JOBS`;
nothing it asked for is done. Jobs are counted in the database, in the transaction
that queues the new one, so every server process sees them; imports in this process.

Memory is bounded apart from that: hook bodies (whole transcripts, up to
`STRATA_HOOK_MAX_BODY_BYTES` each) are held in memory while they are imported, so the
process admits at most `STRATA_HOOK_BODY_BUDGET_BYTES` of them at once, whichever
tenants send them; past it a hook post gets 503 with a `Retry-After`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.repositories.jobs import JobRepository
from app.domain.errors import ServerBusy, TooManyRequests


class Admission:
    """A tenant's new work, admitted while its queued and running jobs plus its imports
    in flight (in this process) stay under `limit`; `limit` 0 or less: no cap."""

    def __init__(self, limit: int, *, retry_after_seconds: int) -> None:
        self.limit = limit
        self.retry_after_seconds = retry_after_seconds
        self._imports: dict[str, int] = {}

    def imports_in_flight(self, tenant: str) -> int:
        return self._imports.get(tenant, 0)

    async def admit_job(self, db: AsyncSession, tenant: str) -> None:
        """Refuse a new job of `tenant` when it is at its cap. Called first in the write
        unit that queues the job: what it counts holds until that unit commits."""
        if self.limit <= 0:
            return
        jobs = JobRepository(db)
        await jobs.lock_tenant_admission(tenant)
        self._refuse_past_cap(tenant, await jobs.active_count(tenant), 0)

    @asynccontextmanager
    async def import_slot(self, database: UnitsOfWork, tenant: str) -> AsyncIterator[None]:
        """Count an import of `tenant` as running work for the block, however it ends;
        refuse it (nothing imported) when the tenant is at its cap."""
        with self._importing(tenant):
            if self.limit > 0:
                async with database.read() as db:
                    active = await JobRepository(db).active_count(tenant)
                self._refuse_past_cap(tenant, active, 1)  # itself is counted already
            yield

    def _refuse_past_cap(self, tenant: str, jobs: int, own: int) -> None:
        imports = self.imports_in_flight(tenant) - own
        if jobs + imports >= self.limit:
            raise TooManyRequests(
                f"tenant {tenant!r} has {jobs} jobs queued or running and {imports} imports "
                f"running, the most allowed (STRATA_TENANT_MAX_ACTIVE_JOBS); retry after "
                f"{self.retry_after_seconds} s",
                retry_after=self.retry_after_seconds,
            )

    @contextmanager
    def _importing(self, tenant: str) -> Iterator[None]:
        self._imports[tenant] = self.imports_in_flight(tenant) + 1
        try:
            yield
        finally:
            left = self._imports[tenant] - 1
            if left:
                self._imports[tenant] = left
            else:
                del self._imports[tenant]


class ByteBudget:
    """Bytes of request bodies held at once, process-wide; `limit` 0 or less: no budget.
    Used on the event loop only."""

    def __init__(self, limit: int, *, retry_after_seconds: int) -> None:
        self.limit = limit
        self.retry_after_seconds = retry_after_seconds
        self.in_flight = 0

    @contextmanager
    def claim(self) -> Iterator[BodyClaim]:
        """A claim that grows with the body it holds and is given back whole when the
        block ends, however it ends."""
        claim = BodyClaim(self)
        try:
            yield claim
        finally:
            self.in_flight -= claim.held


class BodyClaim:
    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow_to(self, size: int) -> None:
        """Hold `size` bytes in all (a declared length, or what has arrived so far);
        refused with 503 when that takes the process past its budget."""
        more = size - self.held
        if more <= 0:
            return
        budget = self._budget
        if 0 < budget.limit < budget.in_flight + more:
            raise ServerBusy(
                f"hook bodies of {budget.in_flight} bytes are being imported; this one's "
                f"{size} bytes would pass STRATA_HOOK_BODY_BUDGET_BYTES ({budget.limit}); "
                f"retry after {budget.retry_after_seconds} s",
                retry_after=budget.retry_after_seconds,
            )
        budget.in_flight += more
        self.held = size
