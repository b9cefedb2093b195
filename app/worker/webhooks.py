"""The webhook dispatcher: claim due deliveries under a lease, POST them, record each try.

Durability comes from the outbox table: a delivery is leased, sent, and its
attempt recorded in a second transaction. A process that dies in between leaves
the lease to expire and any dispatcher sends the delivery again, with the same
`webhook-id` (at-least-once: receivers deduplicate by that id).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

import httpx

import app as app_package
from app.db.engine import Database, is_transient
from app.db.types import utcnow
from app.domain.webhook_signing import signed_headers
from app.observability.metrics import WEBHOOK_ATTEMPTS
from app.services.actions import any_due, expire_due
from app.services.idempotency import purge_expired_keys
from app.services.webhook_targets import Target, TargetRefused, resolve_target
from app.services.webhooks import (
    AttemptResult,
    Claimed,
    claim_deliveries,
    due_deliveries_exist,
    record_attempt,
)
from app.settings import Settings
from app.worker.idle import idle
from app.worker.outage import Outage

logger = logging.getLogger("strata.webhooks")

BATCH = 16  # deliveries sent at once by one dispatcher
LEASE_MARGIN_SECONDS = 30.0  # beyond the attempt's timeout, before another dispatcher may retry
USER_AGENT = f"Strata-Webhooks/{app_package.__version__}"


def body_of(payload: dict[str, object]) -> bytes:
    """The exact bytes that are signed and sent."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class WebhookDispatcher:
    def __init__(self, settings: Settings, database: Database) -> None:
        self.settings = settings
        self.database = database
        self.ticked_at: float | None = None  # loop time of the last turn of the main loop
        self._wake = asyncio.Event()
        self._outage = Outage(logger, "webhook dispatcher", settings.db_retry_max_seconds)

    def wake(self) -> None:
        """Tell the dispatcher a delivery may be due (saves a poll interval)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        logger.info("webhook dispatcher started")
        async with httpx.AsyncClient(
            follow_redirects=False, headers={"user-agent": USER_AGENT}
        ) as client:
            loop = asyncio.get_running_loop()
            purge_at = sweep_at = loop.time()
            while not stop.is_set():
                self.ticked_at = loop.time()
                if self.ticked_at >= purge_at:
                    purge_at = self.ticked_at + self.settings.idempotency_purge_seconds
                    await self._purge_idempotency_keys()
                if self.ticked_at >= sweep_at:
                    sweep_at = self.ticked_at + self.settings.action_sweep_seconds
                    await self._expire_actions()
                try:
                    claimed = await self._claim()
                except Exception as exc:  # the database is away: keep the dispatcher alive
                    self._outage.failed(exc, "could not claim deliveries")
                    claimed = []
                else:
                    self._outage.recovered()
                if claimed:
                    async with asyncio.TaskGroup() as group:
                        for one in claimed:
                            group.create_task(self._deliver(client, one))
                    continue
                await self._idle(stop)
        logger.info("webhook dispatcher stopped")

    async def _purge_idempotency_keys(self) -> None:
        """Housekeeping that rides on this loop (one per runner process): expired
        Idempotency-Key rows; a failure waits for the next round."""
        try:
            purged = await self.database.write(purge_expired_keys)
        except Exception as exc:  # a transient error is the outage the database logs
            level = logging.DEBUG if is_transient(exc) else logging.WARNING
            logger.log(level, "could not purge expired idempotency keys: %s", type(exc).__name__)
            return
        if purged:
            logger.info("purged %d expired idempotency keys", purged)

    async def _expire_actions(self) -> None:
        """Housekeeping that rides on this loop: pending actions whose `expires_in` passed
        are resolved by their rule's `on_timeout`, so no turn waits for nobody forever; a
        failure waits for the next round."""
        try:
            now = utcnow()
            if not await any_due(self.database, now):
                return
            expired = await self.database.write(
                lambda db: expire_due(db, now, self.settings.action_sweep_batch)
            )
        except Exception as exc:
            level = logging.DEBUG if is_transient(exc) else logging.WARNING
            logger.log(level, "could not expire pending actions: %s", type(exc).__name__)
            return
        if expired:
            logger.info("%d pending actions expired", expired)

    async def _idle(self, stop: asyncio.Event) -> None:
        await idle(self._wake, stop, self._outage.backoff(self.settings.webhook_poll_seconds))

    async def _claim(self) -> list[Claimed]:
        lease = self.settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
        if not await due_deliveries_exist(self.database, self.settings):
            return []  # an idle poll never queues for the writer
        return await self.database.write(
            lambda db: claim_deliveries(db, self.settings, lease_seconds=lease, limit=BATCH)
        )

    async def _deliver(self, client: httpx.AsyncClient, claimed: Claimed) -> None:
        result = await self.attempt(client, claimed)
        WEBHOOK_ATTEMPTS.labels("delivered" if result.ok else "failed").inc()
        if not result.ok:
            logger.info(
                "webhook delivery %s attempt %s failed: %s",
                claimed.delivery_id,
                claimed.attempt,
                result.describe(),
            )
        try:
            await self.database.write(lambda db: record_attempt(db, self.settings, claimed, result))
        except Exception:  # the lease expires and the delivery is tried again
            logger.exception("could not record webhook delivery %s", claimed.delivery_id)

    async def attempt(self, client: httpx.AsyncClient, claimed: Claimed) -> AttemptResult:
        """One signed POST; never raises: every failure becomes the attempt's error."""
        started_at = utcnow()
        clock = time.monotonic()
        timeout = self.settings.webhook_timeout_seconds
        status: int | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(timeout):
                target = await resolve_target(
                    claimed.url, allow_private=self.settings.webhook_allow_private
                )
                status = await self._post(client, claimed, target)
        except TargetRefused as exc:
            error = f"refused: {exc.detail}"
        except (TimeoutError, httpx.TimeoutException):
            error = f"timed out after {timeout:g} s"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        except Exception as exc:
            logger.exception("webhook delivery %s crashed", claimed.delivery_id)
            error = f"{type(exc).__name__}: {exc}"
        duration_ms = round((time.monotonic() - clock) * 1000)
        return AttemptResult(started_at, duration_ms, status_code=status, error=error)

    async def _post(self, client: httpx.AsyncClient, claimed: Claimed, target: Target) -> int:
        """Connects to the address that passed the check (no second DNS look-up that could
        answer differently); the host name still goes in `Host` and in TLS (SNI and the
        certificate check)."""
        body = body_of(claimed.payload)
        headers = {
            "host": target.host_header,
            "content-type": "application/json",
            **signed_headers(claimed.secrets, claimed.delivery_id, int(time.time()), body),
        }
        # the response body is not read: only the status counts
        async with client.stream(
            "POST",
            target.pinned_url,
            content=body,
            headers=headers,
            extensions={"sni_hostname": target.host},
        ) as response:
            return response.status_code
