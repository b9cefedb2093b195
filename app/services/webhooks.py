"""Outbound webhooks: subscriptions, target checks, the outbox and what an attempt changes.

`enqueue_event` writes one delivery per interested subscription in the caller's
transaction, so an event exists exactly when the change that caused it was
committed. The dispatcher (`app.worker.webhooks`) claims due deliveries, sends
them and hands each attempt's result to `record_attempt`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches, signals
from app.db.engine import UnitsOfWork
from app.db.models import Job, WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.db.repositories.webhooks import WebhookRepository, any_due
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.ids import new_id
from app.domain.jobs import JobKind, JobStatus
from app.domain.tasks import Task
from app.domain.webhook_signing import generate_secret
from app.services.event_payloads import (
    job_status_data,
    movement_data,
    task_updated_data,
    turn_data,
)
from app.services.events import record_event
from app.services.pagination import Page, page_of
from app.settings import Settings

logger = logging.getLogger("strata.webhooks")

EventType = Literal[
    "action.required",
    "action.resolved",
    "job.succeeded",
    "job.failed",
    "job.aborted",
    "job.cancelled",
    "job.waiting_human",
    "job.waiting_subtasks",
    "movement.started",
    "movement.ended",
    "session.forked",
    "session.rewound",
    "session.turn.completed",
    "task.updated",
    "turn.interrupted",
    "turn.steered",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
ALL_EVENTS = "*"
TEST_EVENT = "webhook.test"
JOB_EVENTS = {event.removeprefix("job."): event for event in EVENT_TYPES if event[:4] == "job."}


def _check_events(events: list[str]) -> list[str]:
    unknown = [e for e in events if e != ALL_EVENTS and e not in EVENT_TYPES]
    if unknown or not events:
        raise InvalidInput(
            f"events: unknown {unknown}; known: {[ALL_EVENTS, *EVENT_TYPES]}", field="events"
        )
    return list(dict.fromkeys(events))


# --- subscriptions ----------------------------------------------------------------
async def create_subscription(
    db: AsyncSession,
    tenant: str,
    *,
    url: str,
    events: list[str],
    description: str | None,
) -> WebhookSubscription:
    """`url` has passed `check_target`. The returned row holds the secret; it is shown
    to the client this once."""
    row = WebhookSubscription(
        id=new_id("wh"),
        tenant=tenant,
        url=url,
        events=_check_events(events),
        description=description,
        secret=generate_secret(),
    )
    caches.forget(db, caches.WEBHOOKS, tenant)
    return await WebhookRepository(db).save(row)


async def get_subscription(
    db: AsyncSession, tenant: str, subscription_id: str
) -> WebhookSubscription:
    row = await WebhookRepository(db).get(tenant, subscription_id)
    if row is None:
        raise NotFound(f"webhook {subscription_id!r} does not exist", resource="webhook")
    return row


async def list_subscriptions(
    db: AsyncSession, tenant: str, *, limit: int, after: str | None
) -> Page[WebhookSubscription]:
    rows = await WebhookRepository(db).list_page(tenant, limit=limit + 1, before_id=after)
    return page_of(rows, limit, lambda row: row.id)


@dataclass(frozen=True)
class SubscriptionChanges:
    """What a PATCH of a subscription changes: `url`, `events` and `enabled` when not
    None; `description` when `description_sent` (None then clears it)."""

    url: str | None = None
    events: list[str] | None = None
    enabled: bool | None = None
    description: str | None = None
    description_sent: bool = False


async def update_subscription(
    db: AsyncSession,
    tenant: str,
    subscription_id: str,
    changes: SubscriptionChanges,
) -> WebhookSubscription:
    """Only the fields sent change (a new `url` has passed `check_target`). Enabling
    again clears the reason and the failing clock."""
    row = await get_subscription(db, tenant, subscription_id)
    if changes.url is not None:
        row.url = changes.url
    if changes.events is not None:
        row.events = _check_events(changes.events)
    if changes.description_sent:
        row.description = changes.description
    if changes.enabled is not None:
        if changes.enabled and not row.enabled:
            row.disabled_reason = None
            row.failing_since = None
        row.enabled = changes.enabled
    row.updated_at = utcnow()
    await WebhookRepository(db).save(row)
    caches.forget(db, caches.WEBHOOKS, tenant)
    return row


async def rotate_secret(
    db: AsyncSession, tenant: str, subscription_id: str, overlap_seconds: float
) -> WebhookSubscription:
    """A new signing secret (returned once, in the row). The one it replaces keeps signing
    deliveries too for `overlap_seconds` (STRATA_WEBHOOK_SECRET_OVERLAP_SECONDS): each
    carries both signatures meanwhile, so a receiver switches without rejecting one."""
    row = await get_subscription(db, tenant, subscription_id)
    now = utcnow()
    overlaps = overlap_seconds > 0
    row.previous_secret = row.secret if overlaps else None
    row.previous_secret_until = now + timedelta(seconds=overlap_seconds) if overlaps else None
    row.secret = generate_secret()
    row.updated_at = now
    await WebhookRepository(db).save(row)
    return row


def signing_secrets(row: WebhookSubscription, now: datetime) -> tuple[str, ...]:
    """The secrets a delivery is signed with at `now`: the current one, and the one before
    it while its overlap lasts."""
    until = row.previous_secret_until
    if row.previous_secret is not None and until is not None and now < until:
        return (row.secret, row.previous_secret)
    return (row.secret,)


async def disable_tenant_subscriptions(db: AsyncSession, tenant: str, reason: str) -> int:
    """Disable every enabled subscription of `tenant` (nothing more is delivered to them,
    what was queued included); how many were."""
    disabled = await WebhookRepository(db).disable_for_tenant(tenant, reason)
    caches.forget(db, caches.WEBHOOKS, tenant)
    return disabled


async def delete_subscription(db: AsyncSession, tenant: str, subscription_id: str) -> None:
    repo = WebhookRepository(db)
    await repo.remove(await get_subscription(db, tenant, subscription_id))
    caches.forget(db, caches.WEBHOOKS, tenant)


# --- deliveries as the API shows them --------------------------------------------
@dataclass(frozen=True)
class DeliveryView:
    delivery: WebhookDelivery
    attempts: list[WebhookAttempt]


async def list_deliveries(
    db: AsyncSession, tenant: str, subscription_id: str, *, limit: int, after: str | None
) -> Page[DeliveryView]:
    await get_subscription(db, tenant, subscription_id)
    repo = WebhookRepository(db)
    rows = await repo.deliveries_page(subscription_id, limit=limit + 1, before_id=after)
    page = page_of(rows, limit, lambda row: row.id)
    attempts = await repo.attempts_of([row.id for row in page.data])
    views = [
        DeliveryView(row, [a for a in attempts if a.delivery_id == row.id]) for row in page.data
    ]
    return Page(data=views, next_cursor=page.next_cursor)


async def redeliver(
    db: AsyncSession, tenant: str, subscription_id: str, delivery_id: str
) -> DeliveryView:
    """Send a delivery that ended (succeeded or failed) again: the same `webhook-id` and
    payload, so a receiver that did process it can tell, with a fresh retry schedule. Its
    earlier attempts stay listed. 409 while it is still being tried or the subscription is
    disabled."""
    subscription = await get_subscription(db, tenant, subscription_id)
    repo = WebhookRepository(db)
    # locked: the dispatcher's record of an attempt and this change never interleave
    delivery = await repo.by_id(WebhookDelivery, delivery_id, locked=True)
    if delivery is None or delivery.subscription_id != subscription.id:
        raise NotFound(f"webhook {subscription_id!r} has no delivery {delivery_id!r}")
    if delivery.status == "pending":
        raise Conflict(f"delivery {delivery_id!r} is still being tried")
    if not subscription.enabled:
        raise Conflict(f"webhook {subscription_id!r} is disabled; enable it first")
    delivery.status = "pending"
    delivery.attempts = 0
    delivery.next_attempt_at = utcnow()
    delivery.lease_until = None
    delivery.delivered_at = None
    await repo.save(delivery)
    signals.emit(db, signals.WakeDispatcher())
    return DeliveryView(delivery, await repo.attempts_of([delivery.id]))


async def send_test(db: AsyncSession, tenant: str, subscription_id: str) -> DeliveryView:
    """Queue a `webhook.test` event for this subscription alone."""
    row = await get_subscription(db, tenant, subscription_id)
    if not row.enabled:
        raise Conflict(f"webhook {subscription_id!r} is disabled; enable it first")
    payload = event_payload(TEST_EVENT, {"subscription_id": row.id}, utcnow())
    delivery = await _add_delivery(WebhookRepository(db), row.id, TEST_EVENT, payload)
    return DeliveryView(delivery, [])


# --- the outbox ---------------------------------------------------------------------
def event_payload(type_: str, data: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {"type": type_, "timestamp": at.isoformat().replace("+00:00", "Z"), "data": data}


@dataclass(frozen=True)
class Target:
    """What queueing an event needs of an enabled subscription (what is cached of it)."""

    subscription_id: str
    events: frozenset[str]

    def wants(self, type_: str) -> bool:
        return ALL_EVENTS in self.events or type_ in self.events


async def _add_delivery(
    repo: WebhookRepository, subscription_id: str, type_: str, payload: dict[str, Any]
) -> WebhookDelivery:
    row = WebhookDelivery(
        id=new_id("msg"), subscription_id=subscription_id, event_type=type_, payload=payload
    )
    signals.emit(repo.db, signals.WakeDispatcher())
    return await repo.add_delivery(row)


async def _targets(db: AsyncSession, tenant: str) -> tuple[Target, ...]:
    """The tenant's enabled subscriptions, cached for STRATA_WEBHOOK_CACHE_SECONDS; every
    change made in this process (`forget`) is seen at once."""
    cache = caches.caches_of(db)
    if cache is None:
        return await _read_targets(db, tenant)
    subscriptions: caches.TtlCache[str, tuple[Target, ...]] = cache[caches.WEBHOOKS]
    found = subscriptions.get(tenant)
    if not isinstance(found, caches.Miss):
        return found
    stamp = subscriptions.stamp()
    targets = await _read_targets(db, tenant)
    subscriptions.put(tenant, targets, stamp)
    return targets


async def _read_targets(db: AsyncSession, tenant: str) -> tuple[Target, ...]:
    rows = await WebhookRepository(db).enabled_for_tenant(tenant)
    return tuple(Target(subscription_id, frozenset(events)) for subscription_id, events in rows)


async def enqueue_event(
    db: AsyncSession, tenant: str, type_: str, data: dict[str, Any]
) -> list[WebhookDelivery]:
    """One delivery per enabled subscription of `tenant` that wants `type_`, written in
    the caller's transaction (rolled back with it)."""
    targets = [target for target in await _targets(db, tenant) if target.wants(type_)]
    if not targets:
        return []
    repo = WebhookRepository(db)
    payload = event_payload(type_, data, utcnow())
    return [await _add_delivery(repo, t.subscription_id, type_, payload) for t in targets]


async def job_status_changed(
    db: AsyncSession, job: Job, *, error: dict[str, Any] | None, result: dict[str, Any] | None
) -> None:
    """`job.<status>` for the statuses subscribers can ask for; a chat job that
    succeeded is also a `session.turn.completed`, unless it was a steer that another
    turn took (its `turn.steered` says so)."""
    event = JOB_EVENTS.get(job.status)
    if event is None:
        return
    await enqueue_event(db, job.tenant, event, job_status_data(job, error=error))
    if job.status == JobStatus.succeeded and job.kind == JobKind.chat and not job.steer:
        turn = {
            "session_id": job.session_id,
            "job_id": job.id,
            "turn": job.turn,
            "text": (result or job.result or {}).get("text"),
        }
        await enqueue_event(db, job.tenant, "session.turn.completed", turn)


async def task_updated(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    task: Task,
    *,
    op: str,
    origin: str,
    job_id: str | None = None,
) -> None:
    """The `task.updated` event of the session's streams and its webhook, one payload."""
    data = task_updated_data(session_id, task, op=op, origin=origin, job_id=job_id)
    await record_event(db, session_id, "task.updated", data, job_id=job_id)
    await enqueue_event(db, tenant, "task.updated", data)


async def movement_event(
    db: AsyncSession,
    job: Job,
    type_: Literal["movement.started", "movement.ended"],
    movement: str,
    **more: Any,
) -> None:
    """A piece job's movement began or transitioned: the event of the job's streams and
    its webhook, one payload, in the transaction that records it."""
    data = movement_data(job, movement, **more)
    await record_event(db, job.session_id, type_, data, job_id=job.id)
    await enqueue_event(db, job.tenant, type_, data)


async def turn_event(
    db: AsyncSession,
    job: Job,
    type_: Literal["turn.interrupted", "turn.steered"],
    **more: Any,
) -> None:
    """The user interrupted the job's turn, or steered it: the event of the session's
    streams and its webhook, one payload, in the transaction that records it."""
    data = turn_data(job, **more)
    await record_event(db, job.session_id, type_, data, job_id=job.id)
    await enqueue_event(db, job.tenant, type_, data)


# --- the dispatcher's side ------------------------------------------------------
@dataclass(frozen=True)
class Claimed:
    """A leased delivery and what sending it needs; the lease is its claim token."""

    delivery_id: str
    subscription_id: str
    url: str
    secrets: tuple[str, ...]  # the current secret first (see `signing_secrets`)
    payload: dict[str, Any]
    attempt: int
    lease_until: datetime


@dataclass(frozen=True)
class AttemptResult:
    started_at: datetime
    duration_ms: int
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    def describe(self) -> str:
        return f"HTTP {self.status_code}" if self.error is None else str(self.error)


def _due_window(settings: Settings) -> tuple[datetime, datetime]:
    """Now, and before when a delivery not yet tried must have been queued to be due (its
    first attempt waits the schedule's first delay): the poll and the claim decide alike."""
    now = utcnow()
    return now, now - timedelta(seconds=settings.webhook_retry_delays[0])


async def due_deliveries_exist(units: UnitsOfWork, settings: Settings) -> bool:
    """One small read outside any unit of work (`UnitsOfWork.peek`): an idle dispatcher
    asks every poll."""
    now, first_due = _due_window(settings)
    return await any_due(units, now, first_due)


async def claim_deliveries(
    db: AsyncSession, settings: Settings, *, lease_seconds: float, limit: int
) -> list[Claimed]:
    now, first_due = _due_window(settings)
    rows = await WebhookRepository(db).claim_due(
        now, first_due, now + timedelta(seconds=lease_seconds), limit
    )
    return [
        Claimed(
            delivery_id=delivery.id,
            subscription_id=subscription.id,
            url=subscription.url,
            secrets=signing_secrets(subscription, now),
            payload=delivery.payload,
            attempt=delivery.attempts,
            lease_until=delivery.lease_until or now,
        )
        for delivery, subscription in rows
    ]


async def record_attempt(
    db: AsyncSession, settings: Settings, claimed: Claimed, result: AttemptResult
) -> None:
    """Store the attempt; then succeed, schedule the next try, or fail for good.

    A delivery whose lease is no longer this claim's (it expired and another
    dispatcher took it) or that was deleted is left alone."""
    repo = WebhookRepository(db)
    delivery = await repo.get_delivery(claimed.delivery_id)
    if delivery is None or delivery.status != "pending":
        return
    if delivery.lease_until != claimed.lease_until:
        return
    now = utcnow()
    await repo.save(
        WebhookAttempt(
            delivery_id=delivery.id,
            attempted_at=result.started_at,
            status_code=result.status_code,
            error=result.error,
            duration_ms=result.duration_ms,
        )
    )
    delivery.last_status_code = result.status_code
    delivery.last_error = result.error
    delivery.lease_until = None
    if result.ok:
        delivery.status = "succeeded"
        delivery.delivered_at = now
        await repo.save(delivery)
        await repo.mark_healthy(claimed.subscription_id)
        return
    delays = settings.webhook_retry_delays
    if delivery.attempts < len(delays):
        delivery.next_attempt_at = now + timedelta(seconds=delays[delivery.attempts])
    else:
        delivery.status = "failed"
    await repo.save(delivery)
    await repo.mark_failing(claimed.subscription_id, now)
    if delivery.status == "failed":
        await _disable_if_failing_long(repo, settings, claimed.subscription_id, result, now)


async def _disable_if_failing_long(
    repo: WebhookRepository,
    settings: Settings,
    subscription_id: str,
    result: AttemptResult,
    now: datetime,
) -> None:
    """Checked when a delivery fails for good, so a delivery never stays stranded
    half-way through its schedule by the disabling."""
    hours = settings.webhook_disable_after_hours
    reason = (
        f"disabled after its deliveries failed for {hours:g} h without a success "
        f"(STRATA_WEBHOOK_DISABLE_AFTER_HOURS); last attempt: {result.describe()}"
    )
    cutoff = now - timedelta(hours=hours)
    if await repo.disable_if_failing_since(subscription_id, cutoff, reason[:500]):
        caches.forget(repo.db, caches.WEBHOOKS)  # its tenant is not at hand; rare enough
        logger.warning("webhook %s disabled: %s", subscription_id, reason)
